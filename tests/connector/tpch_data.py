"""A small, seeded TPC-H data generator for the suite (tpchgen-cli is a benchmark-only tool).

It follows the TPC-H specification's generation rules where the 22 queries look: the 25
nations and 5 regions, the part name colours, types, containers, brands and sizes, the market
segments, order priorities, ship modes and instructions, phone numbers that start with the
nation's country code, dates from 1992 to 1998 with ship, commit and receipt dates derived from
the order date, return flags and line statuses from the current date (1995-06-17), order
status and total price from the order's lines, a third of the customers without orders, the
partsupp formula that gives each part four suppliers, and the comment words the queries search
for ("special ... requests", "Customer ... Complaints").  Columns are built with NumPy; only
the text columns are joined per row, which at SF 0.01 is a few hundred milliseconds.

``generate(scale)`` returns the eight tables as pyarrow Tables with the schemas of
``benchmarks.tpch.schema`` (BIGINT keys, INT, DECIMAL(15,2), DATE, STRING).
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa

__all__ = ["generate"]

REGIONS = ["AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST"]
NATIONS = [  # (name, region key), in the specification's key order
    ("ALGERIA", 0), ("ARGENTINA", 1), ("BRAZIL", 1), ("CANADA", 1), ("EGYPT", 4), ("ETHIOPIA", 0),
    ("FRANCE", 3), ("GERMANY", 3), ("INDIA", 2), ("INDONESIA", 2), ("IRAN", 4), ("IRAQ", 4), ("JAPAN", 2),
    ("JORDAN", 4), ("KENYA", 0), ("MOROCCO", 0), ("MOZAMBIQUE", 0), ("PERU", 1), ("CHINA", 2), ("ROMANIA", 3),
    ("SAUDI ARABIA", 4), ("VIETNAM", 2), ("RUSSIA", 3), ("UNITED KINGDOM", 3), ("UNITED STATES", 1),
]
COLORS = (
    "almond antique aquamarine azure beige bisque black blanched blue blush brown burlywood burnished "
    "chartreuse chiffon chocolate coral cornflower cornsilk cream cyan dark deep dim dodger drab firebrick "
    "floral forest frosted gainsboro ghost goldenrod green grey honeydew hot indian ivory khaki lace lavender "
    "lawn lemon light lime linen magenta maroon medium metallic midnight mint misty moccasin navajo navy olive "
    "orange orchid pale papaya peach peru pink plum powder puff purple red rose rosy royal saddle salmon sandy "
    "seashell sienna sky slate smoke snow spring steel tan thistle tomato turquoise violet wheat white yellow"
).split()
TYPE_1 = ["STANDARD", "SMALL", "MEDIUM", "LARGE", "ECONOMY", "PROMO"]
TYPE_2 = ["ANODIZED", "BURNISHED", "PLATED", "POLISHED", "BRUSHED"]
TYPE_3 = ["TIN", "NICKEL", "BRASS", "STEEL", "COPPER"]
CONTAINER_1 = ["SM", "LG", "MED", "JUMBO", "WRAP"]
CONTAINER_2 = ["CASE", "BOX", "BAG", "JAR", "PKG", "PACK", "CAN", "DRUM"]
SEGMENTS = ["AUTOMOBILE", "BUILDING", "FURNITURE", "MACHINERY", "HOUSEHOLD"]
PRIORITIES = ["1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW"]
INSTRUCTIONS = ["DELIVER IN PERSON", "COLLECT COD", "NONE", "TAKE BACK RETURN"]
MODES = ["REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB"]
WORDS = (
    "furiously carefully quickly slyly blithely ironic regular express final pending special bold even "
    "silent unusual requests deposits accounts packages theodolites instructions foxes pinto beans ideas "
    "asymptotes dependencies platelets excuses sleep wake nag haggle cajole use boost detect integrate"
).split()

START = dt.date(1992, 1, 1)
END = dt.date(1998, 12, 31)
CURRENT = (dt.date(1995, 6, 17) - dt.date(1970, 1, 1)).days  # the specification's CURRENTDATE
_EPOCH_START = (START - dt.date(1970, 1, 1)).days
_EPOCH_LAST_ORDER = (END - dt.date(1970, 1, 1)).days - 151  # orders end 151 days before END


def _decimal(cents: np.ndarray) -> pa.Array:
    """DECIMAL(15,2) from integer hundredths: the 16-byte little-endian words Arrow keeps."""
    cents = np.asarray(cents, dtype=np.int64)
    words = np.empty((len(cents), 2), dtype=np.int64)
    words[:, 0] = cents
    words[:, 1] = np.where(cents < 0, -1, 0)  # sign extension into the high word
    return pa.Array.from_buffers(pa.decimal128(15, 2), len(cents), [None, pa.py_buffer(words.tobytes())])


def _dates(days: np.ndarray) -> pa.Array:
    return pa.array(np.asarray(days, dtype=np.int32), pa.date32())


def _pick(rng: np.random.Generator, words: list[str], n: int) -> np.ndarray:
    return np.asarray(words, dtype=object)[rng.integers(0, len(words), n)]


def _text(rng: np.random.Generator, n: int, words: int = 6, plant: tuple[str, str] | None = None,
          share: float = 0.0) -> pa.Array:
    """Comments of ``words`` vocabulary words; a ``share`` of them hold ``plant``'s two words
    in order with a word between them (what LIKE '%a%b%' looks for)."""
    picked = _pick(rng, WORDS, n * words).reshape(n, words)
    if plant is not None:
        rows = np.flatnonzero(rng.random(n) < share)
        picked[rows, 1], picked[rows, 3] = plant
    return pa.array([" ".join(r) for r in picked], pa.string())


def _phones(rng: np.random.Generator, nations: np.ndarray) -> pa.Array:
    parts = rng.integers([100, 100, 1000], [1000, 1000, 10000], (len(nations), 3))
    return pa.array([f"{10 + n}-{a}-{b}-{c}" for n, (a, b, c) in zip(nations.tolist(), parts.tolist())], pa.string())


def _names(prefix: str, keys: np.ndarray) -> pa.Array:
    return pa.array([f"{prefix}#{k:09d}" for k in keys.tolist()], pa.string())


def _partsupp_supplier(partkey: np.ndarray, i: np.ndarray, suppliers: int) -> np.ndarray:
    """The specification's supplier of part ``partkey``'s ``i``-th (0-3) partsupp row."""
    return (partkey + i * (suppliers // 4 + (partkey - 1) // suppliers)) % suppliers + 1


def generate(scale: float = 0.01, seed: int = 7) -> dict[str, pa.Table]:
    """The eight TPC-H tables at ``scale`` (SF 0.01: 100 suppliers, 2,000 parts, 1,500
    customers, 15,000 orders, about 60,000 lines), the same for the same seed."""
    rng = np.random.default_rng(seed)
    n_supp = max(8, int(10_000 * scale))
    n_part = max(40, int(200_000 * scale))
    n_cust = max(30, int(150_000 * scale))
    n_orders = n_cust * 10
    out: dict[str, pa.Table] = {}

    out["region"] = pa.table({
        "r_regionkey": pa.array(range(5), pa.int64()), "r_name": pa.array(REGIONS, pa.string()),
        "r_comment": _text(rng, 5)})
    out["nation"] = pa.table({
        "n_nationkey": pa.array(range(25), pa.int64()), "n_name": pa.array([n for n, _ in NATIONS], pa.string()),
        "n_regionkey": pa.array([r for _, r in NATIONS], pa.int64()), "n_comment": _text(rng, 25)})

    s_key = np.arange(1, n_supp + 1, dtype=np.int64)
    s_nation = rng.integers(0, 25, n_supp)
    out["supplier"] = pa.table({
        "s_suppkey": s_key, "s_name": _names("Supplier", s_key), "s_address": _text(rng, n_supp, 2),
        "s_nationkey": s_nation.astype(np.int64), "s_phone": _phones(rng, s_nation),
        "s_acctbal": _decimal(rng.integers(-99_999, 999_999, n_supp, endpoint=True)),
        "s_comment": _text(rng, n_supp, plant=("Customer", "Complaints"), share=0.05)})

    p_key = np.arange(1, n_part + 1, dtype=np.int64)
    colors = _pick(rng, COLORS, n_part * 5).reshape(n_part, 5)
    mfgr = rng.integers(1, 6, n_part)
    types = [" ".join(t) for t in zip(_pick(rng, TYPE_1, n_part), _pick(rng, TYPE_2, n_part), _pick(rng, TYPE_3, n_part))]
    containers = [" ".join(c) for c in zip(_pick(rng, CONTAINER_1, n_part), _pick(rng, CONTAINER_2, n_part))]
    retail_cents = 90_000 + (p_key // 10) % 20_001 + 100 * (p_key % 1_000)  # the specification's formula
    out["part"] = pa.table({
        "p_partkey": p_key, "p_name": pa.array([" ".join(c) for c in colors], pa.string()),
        "p_mfgr": pa.array([f"Manufacturer#{m}" for m in mfgr.tolist()], pa.string()),
        "p_brand": pa.array([f"Brand#{m}{b}" for m, b in zip(mfgr.tolist(), rng.integers(1, 6, n_part).tolist())],
                            pa.string()),
        "p_type": pa.array(types, pa.string()), "p_size": rng.integers(1, 51, n_part).astype(np.int32),
        "p_container": pa.array(containers, pa.string()), "p_retailprice": _decimal(retail_cents),
        "p_comment": _text(rng, n_part, 3)})

    ps_part = np.repeat(p_key, 4)
    ps_supp = _partsupp_supplier(ps_part, np.tile(np.arange(4), n_part), n_supp)
    out["partsupp"] = pa.table({
        "ps_partkey": ps_part, "ps_suppkey": ps_supp.astype(np.int64),
        "ps_availqty": rng.integers(1, 10_000, len(ps_part)).astype(np.int32),
        "ps_supplycost": _decimal(rng.integers(100, 100_000, len(ps_part), endpoint=True)),
        "ps_comment": _text(rng, len(ps_part))})

    c_key = np.arange(1, n_cust + 1, dtype=np.int64)
    c_nation = rng.integers(0, 25, n_cust)
    out["customer"] = pa.table({
        "c_custkey": c_key, "c_name": _names("Customer", c_key), "c_address": _text(rng, n_cust, 2),
        "c_nationkey": c_nation.astype(np.int64), "c_phone": _phones(rng, c_nation),
        "c_acctbal": _decimal(rng.integers(-99_999, 999_999, n_cust, endpoint=True)),
        "c_mktsegment": pa.array(_pick(rng, SEGMENTS, n_cust), pa.string()), "c_comment": _text(rng, n_cust)})

    # orders: sparse keys (the first 8 of every 32), customers whose key is not a multiple of 3
    o_index = np.arange(n_orders, dtype=np.int64)
    o_key = (o_index // 8) * 32 + o_index % 8 + 1
    with_orders = c_key[c_key % 3 != 0]
    o_cust = with_orders[rng.integers(0, len(with_orders), n_orders)]
    o_date = rng.integers(_EPOCH_START, _EPOCH_LAST_ORDER, n_orders, endpoint=True)

    # lineitem: 1 to 7 lines an order, dates and flags derived as the specification says
    lines = rng.integers(1, 8, n_orders)
    n_lines = int(lines.sum())
    l_order = np.repeat(o_key, lines)
    l_odate = np.repeat(o_date, lines)
    starts = np.cumsum(lines) - lines
    l_number = (np.arange(n_lines) - np.repeat(starts, lines) + 1).astype(np.int32)
    l_part = rng.integers(1, n_part + 1, n_lines)
    l_supp = _partsupp_supplier(l_part, rng.integers(0, 4, n_lines), n_supp)
    quantity = rng.integers(1, 51, n_lines)
    price_cents = quantity * retail_cents[l_part - 1]
    discount = rng.integers(0, 11, n_lines)  # hundredths
    tax = rng.integers(0, 9, n_lines)
    ship = l_odate + rng.integers(1, 122, n_lines)
    commit = l_odate + rng.integers(30, 91, n_lines)
    receipt = ship + rng.integers(1, 31, n_lines)
    returned = np.where(rng.random(n_lines) < 0.5, "R", "A")
    flag = np.where(receipt <= CURRENT, returned, "N")
    status = np.where(ship > CURRENT, "O", "F")
    out["lineitem"] = pa.table({
        "l_orderkey": l_order, "l_partkey": l_part.astype(np.int64), "l_suppkey": l_supp.astype(np.int64),
        "l_linenumber": l_number, "l_quantity": _decimal(quantity * 100), "l_extendedprice": _decimal(price_cents),
        "l_discount": _decimal(discount), "l_tax": _decimal(tax),
        "l_returnflag": pa.array(flag.astype(object), pa.string()),
        "l_linestatus": pa.array(status.astype(object), pa.string()),
        "l_shipdate": _dates(ship), "l_commitdate": _dates(commit), "l_receiptdate": _dates(receipt),
        "l_shipinstruct": pa.array(_pick(rng, INSTRUCTIONS, n_lines), pa.string()),
        "l_shipmode": pa.array(_pick(rng, MODES, n_lines), pa.string()), "l_comment": _text(rng, n_lines, 4)})

    # an order's status and total price come from its lines
    line_total = (price_cents * (100 + tax) * (100 - discount) + 5_000) // 10_000  # cents, rounded
    total = np.add.reduceat(line_total, starts)
    open_lines = np.add.reduceat((status == "O").astype(np.int64), starts)
    o_status = np.where(open_lines == lines, "O", np.where(open_lines == 0, "F", "P"))
    out["orders"] = pa.table({
        "o_orderkey": o_key, "o_custkey": o_cust.astype(np.int64),
        "o_orderstatus": pa.array(o_status.astype(object), pa.string()), "o_totalprice": _decimal(total),
        "o_orderdate": _dates(o_date), "o_orderpriority": pa.array(_pick(rng, PRIORITIES, n_orders), pa.string()),
        "o_clerk": _names("Clerk", rng.integers(1, max(2, int(1_000 * scale)) + 1, n_orders)),
        "o_shippriority": np.zeros(n_orders, dtype=np.int32),
        "o_comment": _text(rng, n_orders, plant=("special", "requests"), share=0.02)})
    return out
