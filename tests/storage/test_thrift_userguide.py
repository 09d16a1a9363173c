"""happybase's user guide, run unchanged against `regionscan thrift`.

Each test is one section of the guide (doc/user.rst of happybase 1.x):
establishing a connection, working with tables and table namespaces,
retrieving data, scanning, storing, deleting, batch mutations, atomic
counters and the connection pool.  The guide's code is kept as written;
only the host ('somehost' there) is the gateway's loopback address, the
guide's ``print`` calls become asserts, and ``b'row-%04d'.format(i)`` (an
AttributeError on Python 3) is written ``b'row-%04d' % i``.

The guide creates ``mytable`` with families cf1, cf2 and cf3 but stores into
``cf``; the data sections therefore use a table that has all four.
"""

from __future__ import annotations

from collections import OrderedDict

import happybase
import pytest

from storage.server.process import ServerProcess


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    root = tmp_path_factory.mktemp("thrift_guide") / "root"
    with ServerProcess(str(root), module=("jobs.cli", "thrift")) as proc:  # `regionscan thrift --root R --port 0`
        yield proc


@pytest.fixture(scope="module")
def somehost(gateway):
    return {"host": "127.0.0.1", "port": gateway.port}


@pytest.fixture(scope="module")
def table(somehost):
    connection = happybase.Connection(**somehost)
    connection.create_table("guide", {"cf": dict(), "cf1": dict(max_versions=10), "cf2": dict(), "cf3": dict()})
    yield connection.table("guide")
    connection.close()


def test_establishing_a_connection(somehost):
    connection = happybase.Connection(**somehost)
    assert connection.tables() is not None

    connection = happybase.Connection(autoconnect=False, **somehost)

    # before first use:
    connection.open()

    assert isinstance(connection.tables(), list)
    connection.close()


def test_working_with_tables_and_namespaces(somehost):
    connection = happybase.Connection(**somehost)
    connection.create_table(
        'mytable',
        {'cf1': dict(max_versions=10),
         'cf2': dict(max_versions=1, block_cache_enabled=False),
         'cf3': dict(),  # use defaults
         }
    )
    table = connection.table('mytable')
    families = table.families()
    assert families[b'cf1']['max_versions'] == 10
    assert families[b'cf2']['max_versions'] == 1
    assert families[b'cf3']['max_versions'] == 3  # the Thrift ColumnDescriptor default
    assert b'mytable' in connection.tables()

    connection = happybase.Connection(table_prefix='myproject', **somehost)
    connection.create_table('XYZ', {'cf': dict()})
    assert connection.tables() == [b'XYZ']  # Table "myproject_XYZ" is returned as simply "XYZ"
    table = connection.table('XYZ')  # Operates on myproject_XYZ
    table.put(b'k', {b'cf:a': b'1'})
    plain = happybase.Connection(**somehost)
    assert b'myproject_XYZ' in plain.tables()
    assert plain.table('myproject_XYZ').row(b'k') == {b'cf:a': b'1'}
    assert connection.table('myproject_XYZ', use_prefix=False).row(b'k') == {b'cf:a': b'1'}


def test_retrieving_data(table):
    table.put(b'row-key', {b'cf1:col1': b'value1', b'cf1:col2': b'value2', b'cf2:x': b'x'}, timestamp=123456700)
    table.put(b'row-key-1', {b'cf1:col1': b'one'})
    table.put(b'row-key-2', {b'cf1:col1': b'two'})

    row = table.row(b'row-key')
    assert row[b'cf1:col1'] == b'value1'   # prints the value of cf1:col1

    rows = table.rows([b'row-key-1', b'row-key-2'])
    seen = [(key, data) for key, data in rows]
    assert seen == [(b'row-key-1', {b'cf1:col1': b'one'}), (b'row-key-2', {b'cf1:col1': b'two'})]

    rows_as_dict = dict(table.rows([b'row-key-1', b'row-key-2']))
    assert rows_as_dict[b'row-key-2'] == {b'cf1:col1': b'two'}

    rows_as_ordered_dict = OrderedDict(table.rows([b'row-key-1', b'row-key-2']))
    assert list(rows_as_ordered_dict) == [b'row-key-1', b'row-key-2']

    row = table.row(b'row-key', columns=[b'cf1:col1', b'cf1:col2'])
    assert row[b'cf1:col1'] == b'value1'
    assert row[b'cf1:col2'] == b'value2'
    assert b'cf2:x' not in row

    row = table.row(b'row-key', columns=[b'cf1'])
    assert set(row) == {b'cf1:col1', b'cf1:col2'}

    row = table.row(b'row-key', timestamp=123456789)
    assert row[b'cf1:col1'] == b'value1'  # stored at 123456700, before the timestamp
    assert table.row(b'row-key', timestamp=123456700) == {}  # the bound is exclusive, as in HBase

    row = table.row(b'row-key', columns=[b'cf1:col1'], include_timestamp=True)
    value, timestamp = row[b'cf1:col1']
    assert (value, timestamp) == (b'value1', 123456700)

    table.put(b'row-key', {b'cf1:col1': b'newer'}, timestamp=123456800)
    table.put(b'row-key', {b'cf1:col1': b'newest'}, timestamp=123456900)
    values = table.cells(b'row-key', b'cf1:col1', versions=2)
    assert [value for value in values] == [b'newest', b'newer']

    cells = table.cells(b'row-key', b'cf1:col1', versions=3, include_timestamp=True)
    assert [(value, timestamp) for value, timestamp in cells] == [
        (b'newest', 123456900), (b'newer', 123456800), (b'value1', 123456700)]


def test_scanning(table):
    with table.batch() as b:
        for key in (b'aaa', b'abc1', b'abc2', b'mmm', b'xyz', b'zzz'):
            b.put(key, {b'cf2:k': key})
    keys = [key for key, data in table.scan(columns=[b'cf2:k'])]
    assert keys == [b'aaa', b'abc1', b'abc2', b'mmm', b'xyz', b'zzz']

    assert [key for key, data in table.scan(row_start=b'aaa', columns=[b'cf2:k'])][0] == b'aaa'
    assert [key for key, data in table.scan(row_stop=b'xyz', columns=[b'cf2:k'])][-1] == b'mmm'
    assert [key for key, data in table.scan(row_start=b'aaa', row_stop=b'xyz', columns=[b'cf2:k'])] == [
        b'aaa', b'abc1', b'abc2', b'mmm']
    assert [key for key, data in table.scan(row_prefix=b'abc')] == [b'abc1', b'abc2']


def test_storing_and_deleting(table):
    table.put(b'row-key', {b'cf:col1': b'value1',
                           b'cf:col2': b'value2'})
    table.put(b'row-key', {b'cf:col1': b'value1'}, timestamp=123456789)
    assert table.row(b'row-key', columns=[b'cf']) == {b'cf:col1': b'value1', b'cf:col2': b'value2'}

    table.delete(b'row-key', columns=[b'cf1:col1', b'cf1:col2'])
    assert not any(c.startswith(b'cf1:') for c in table.row(b'row-key'))
    table.delete(b'row-key')
    assert table.row(b'row-key') == {}


def test_batch_mutations(table):
    table.put(b'row-key-4', {b'cf:col1': b'doomed'})
    b = table.batch()
    b.put(b'row-key-1', {b'cf:col1': b'value1', b'cf:col2': b'value2'})
    b.put(b'row-key-2', {b'cf:col2': b'value2', b'cf:col3': b'value3'})
    b.put(b'row-key-3', {b'cf:col3': b'value3', b'cf:col4': b'value4'})
    b.delete(b'row-key-4')
    b.send()
    assert table.row(b'row-key-3', columns=[b'cf']) == {b'cf:col3': b'value3', b'cf:col4': b'value4'}
    assert table.row(b'row-key-4') == {}

    b = table.batch(timestamp=123456789)
    b.put(b'row-ts', {b'cf:col1': b'at-ts'})
    b.send()
    assert table.row(b'row-ts', include_timestamp=True) == {b'cf:col1': (b'at-ts', 123456789)}

    with table.batch() as b:
        b.put(b'row-key-5', {b'cf:col1': b'value1', b'cf:col2': b'value2'})
        b.delete(b'row-key-4')
    assert table.row(b'row-key-5') == {b'cf:col1': b'value1', b'cf:col2': b'value2'}

    b = table.batch()
    try:
        b.put(b'row-key-6', {b'cf:col1': b'value1', b'cf:col2': b'value2'})
        raise ValueError("Something went wrong!")
    except ValueError:
        # error handling goes here; nothing will be sent to HBase
        pass
    else:
        # no exceptions; send data
        b.send()
    assert table.row(b'row-key-6') == {}

    try:
        with table.batch(transaction=True) as b:
            b.put(b'row-key-7', {b'cf:col1': b'value1', b'cf:col2': b'value2'})
            b.delete(b'row-key-5')
            raise ValueError("Something went wrong!")
    except ValueError:
        # error handling goes here; nothing is sent to HBase
        pass
    assert table.row(b'row-key-7') == {}
    assert table.row(b'row-key-5') != {}

    with table.batch(batch_size=1000) as b:
        for i in range(1200):
            # this put() will result in two mutations (two cells)
            b.put(b'row-%04d' % i, {
                b'cf1:col1': b'v1',
                b'cf1:col2': b'v2',
            })
    assert len(list(table.scan(row_start=b'row-0000', row_stop=b'row-1200', columns=[b'cf1']))) == 1200


def test_atomic_counters(table):
    assert table.counter_inc(b'row-key', b'cf1:counter') == 1
    assert table.counter_inc(b'row-key', b'cf1:counter') == 2
    assert table.counter_inc(b'row-key', b'cf1:counter') == 3

    assert table.counter_dec(b'row-key', b'cf1:counter') == 2

    assert table.counter_inc(b'row-key', b'cf1:counter', value=3) == 5

    assert table.counter_get(b'row-key', b'cf1:counter') == 5

    table.counter_set(b'row-key', b'cf1:counter', 12)
    assert table.counter_get(b'row-key', b'cf1:counter') == 12
    assert table.row(b'row-key', columns=[b'cf1:counter'])[b'cf1:counter'] == (12).to_bytes(8, 'big')


def test_connection_pool(somehost, table):
    # Run alone, this test still finds what the guide's earlier sections stored.
    if b'XYZ' not in happybase.Connection(table_prefix='myproject', **somehost).tables():
        happybase.Connection(table_prefix='myproject', **somehost).create_table('XYZ', {'cf': dict()})
    table.put(b'row-key-1', {b'cf:col1': b'value1'})

    pool = happybase.ConnectionPool(size=3, table_prefix='myproject', **somehost)
    with pool.connection() as connection:
        assert b'XYZ' in connection.tables()

    pool = happybase.ConnectionPool(size=3, **somehost)

    def do_something_else():
        with pool.connection() as connection:
            return connection  # use the connection here

    with pool.connection() as connection:
        # use the connection here, e.g.
        assert isinstance(connection.tables(), list)

        # call another function that uses a connection
        assert do_something_else() is connection

    with pool.connection() as connection:
        table = connection.table('guide')
        row = table.row(b'row-key-1')
    assert row[b'cf:col1'] == b'value1'
