"""The fleet table against published serving points: does the project rank GPU kinds by cost
as the published measurements do?

    python bench/fleet_vs_published.py                    # every group, tables and verdicts
    python bench/fleet_vs_published.py --models llama-3.1-8b,deepseek-v3
    python bench/fleet_vs_published.py --json out.json    # inputs (with row ids) and outputs
    python bench/fleet_vs_published.py --check            # exit 1 on a headline violation

The rows are those `bench/estimate_vs_published.py` compares (`bench/data/published_serving
*.jsonl`, read into the projection's terms by `bench/_published_rows.py`). A group is every
row of one model (the config `MODELS` maps it to), one workload (input and output tokens)
and one engine that the estimate can express and that publishes an output throughput,
measured on two or more catalog GPU kinds that have a price (`profiling/data/
gpu_prices.json`). Rows the estimate cannot express, rows without a published throughput
and kinds without a price are left out and counted (the JSON lists them with why).

For each kind of a group, three $ per million output tokens, all at the catalog's
$/GPU-hour (`profiling.measure.hardware_prices.price`):

- published: $/GPU-hour ÷ (the row's output tokens/s per GPU × 3600) × 1e6, the per-GPU
  figure being `output_tokens_per_s` where the row's `throughput_scope` is per_gpu, else
  it ÷ `gpu_count`. Where a kind has several rows in the group (TP 1/2/4/8, request rates
  2 … inf) the kind stands for its cheapest row, named in the table.
- estimate at the point: the same arithmetic over the estimate's own throughput for that
  row at its own operating point (`express`, exactly as the validation computes it).
- fleet: `profiling.projection.fleet.fleet` over the group's kinds, each kind held to the
  format its row was published in (its weights and KV cache as `express` reads them, so
  the ranking compares the published configurations and not a format the search would
  prefer), with the engine limits `express` gives the row (TensorRT-LLM's for its rows,
  vLLM's for the rest); its rows' `usd_per_million_output_tokens`. Its load and targets,
  from the group:
  - load: a request rate, `LOAD_REPLICAS` × the largest published rate one replica of the
    group's rows completes (its output tokens/s ÷ its replicas ÷ its output tokens), so
    that every kind needs many replicas and rounding the replicas up costs a few % at
    most (the headroom column says how much): at a load that one replica carries, every
    kind would cost its hourly price and the ranking would say nothing of throughput.
    Where the fleet's replicas carry far more than the published ones (a static batch of
    8, a row below its kind's saturation) and some kind is left fewer than
    `LOAD_REPLICAS` / 2 replicas, the fleet is sized once more at `LOAD_REPLICAS` × the
    largest capacity (requests/s) of the replicas it chose; the header says which load;
  - targets: no TTFT target (most rows are offline runs, whose TTFT is their queue), and a
    p90 TPOT target of the slowest TPOT of the group's compared rows, each row's the larger
    of its published TPOT or ITL (a mean or median, where it has one) and the estimate's
    own p90 TPOT at its operating point: every published configuration meets it, as
    published and as the estimate sees it, so the fleet may run each kind at least as
    loaded as it was published. The target is common to the kinds, as a fleet's is: a kind
    faster than the one that sets it may hold more users per replica than it was
    published at, so the fleet's operating point departs from the published one where the
    rows were run below saturation;
  - up to `MAX_GPUS` GPUs of a kind (the fleet's default, 64, would cut the dearest kinds
    off at this load).

Verdict: for every pair of kinds (A, B) whose published cost puts A cheaper, the project
ranks them the other way by more than the error band when its $/Mtok of A ÷ that of B >
1 + band (a kind the fleet cannot carry costs ∞). The band is the validation's: the median
|predicted ÷ published − 1| of output throughput over the rows the groups compare
(computed here from the same estimates, never typed); the validation's headline median
over all its headline rows is printed beside it. A pair where either row is weak evidence
(`WEAK`: inferred, unverified, presumed …) is judged and shown, but marked and kept out of
`--check`, as the validation keeps weak rows out of its headline.

How to read it: one table per group (its header: the fleet's load and TPOT target, and the
kind whose row set the target), a line per kind, ranked by the published cost: the row
standing for the kind ("of n": its cheapest of n; "*": weak evidence), its published
output tokens/s per GPU, the $/GPU-hour, the three $/Mtok, their ranks (published /
estimate / fleet), and the fleet's layout (replicas × one replica) with its output tokens/s
per GPU at the load, its users per replica there and its headroom. Then each pair's
verdict: "ok" or "VIOLATION" for the estimate at the point and for the fleet, with the
ratio; a violation names the answer's tokens/s per GPU over the published on each kind,
which says where it departs. A violation of the estimate at the point is the estimate's
throughput error on one kind against the other (the validation's table names it, and
the fleet, built on the same estimate, usually inherits it); one of the fleet alone
comes from what the fleet adds: an operating point other than the published one (the
common TPOT target, a layout other than the published), or rounding. Runs in 10 to
20 s on two cores (the validation's own comparison, for its headline band, included).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._published_rows import (  # noqa: E402
    ENGINE_LIMITS,
    express,
    load_configs,
    load_rows,
)
from bench.estimate_vs_published import compare  # noqa: E402
from profiling.config import Workload  # noqa: E402
from profiling.measure import hardware  # noqa: E402
from profiling.measure.hardware_prices import price, usd_per_million_tokens  # noqa: E402
from profiling.model.shapes import Shapes  # noqa: E402
from profiling.options import KV_CACHE_FORMATS, WEIGHT_FORMATS  # noqa: E402
from profiling.projection.configurations import Configuration  # noqa: E402
from profiling.projection.fleet import FleetRequest, FleetRow, Load, fleet  # noqa: E402
from profiling.projection.precision import model_format  # noqa: E402
from profiling.projection.search import Scenario  # noqa: E402

LOAD_REPLICAS = 16  # the fleet's load: this many of the largest published replica's rate
MAX_GPUS = 4096  # GPUs of one kind the fleet may size at that load


# -- the inputs ------------------------------------------------------------------------


def per_gpu(row: dict[str, Any], tokens_per_s: float) -> float:
    """Output tokens/s per GPU of a throughput in the row's own scope."""
    return (
        tokens_per_s
        if row.get("throughput_scope") == "per_gpu"
        else tokens_per_s / row["gpu_count"]
    )


def usd_per_mtok(usd_per_gpu_hour: float, tokens_per_s_per_gpu: float) -> float:
    """$ per million output tokens of one GPU at that price and rate (∞ at no tokens)."""
    if tokens_per_s_per_gpu <= 0:
        return math.inf
    return usd_per_million_tokens(usd_per_gpu_hour, tokens_per_s_per_gpu)


def formats(setup: dict[str, Any]) -> tuple[str, str, str]:
    """(the scenario's model dtype, the fleet's weights option, its KV cache option) that
    hold a replica to the row's format as `express` read it."""
    dtype = setup["dtype"]
    own = model_format(dtype)
    # 16-bit, or the checkpoint's own format: the model as it ships ("auto"); else the
    # weight option that names the quantization.
    weights = next((k for k, v in WEIGHT_FORMATS.items() if v == dtype), "?")
    weights = "auto" if own == dtype else weights
    kv = "fp8" if setup["kv_dtype"] == KV_CACHE_FORMATS["fp8"] else "auto"
    return own, weights, kv


def tpot_p90_at_point(row: dict[str, Any], configs: dict[str, dict[str, Any]]) -> float | None:
    """The estimate's p90 TPOT (ms) at the row's own operating point. `express` reports a
    latency only beside a published one: the row is expressed again with NaN standing for
    its TPOT (a placeholder, never compared), and the prediction's p90 read back."""
    stand_in = dict(row, itl_or_tpot_ms=math.nan, itl_stat="TPOT (stand-in)")
    metric = express(stand_in, configs)["metrics"].get("itl_tpot")
    return metric["predicted_p90"] if metric else None


def grouped(
    rows: list[dict[str, Any]], results: list[dict[str, Any]]
) -> tuple[dict[tuple, list[dict[str, Any]]], dict[str, Any]]:
    """The rows, expressed, by (config, input, output tokens, engine); and what was left out."""
    left: dict[str, Any] = {"not_expressible": {}, "no_throughput": [], "unpriced": {}}
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for row, r in zip(rows, results, strict=True):
        if not r["expressible"]:
            left["not_expressible"][row["id"]] = r["reasons"]
            continue
        if not row.get("output_tokens_per_s") or "throughput" not in r["metrics"]:
            left["no_throughput"].append(row["id"])
            continue
        s = r["setup"]
        if price(s["gpu"]) is None:
            left["unpriced"][row["id"]] = s["gpu"]
            continue
        key = (s["config"], s["input_tokens"], s["output_tokens"], r["engine"])
        groups.setdefault(key, []).append({"row": row, "result": r})
    return groups, left


# -- one group -------------------------------------------------------------------------


def kinds_of(members: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each kind's cheapest published row, with its published and estimated $/Mtok."""
    out: dict[str, dict[str, Any]] = {}
    for m in members:
        row, r = m["row"], m["result"]
        key = r["setup"]["gpu"]
        hourly = price(key)
        assert hourly is not None
        published = per_gpu(row, row["output_tokens_per_s"])
        estimated = per_gpu(row, r["metrics"]["throughput"]["predicted"])
        entry = {
            "kind": key, "row": row["id"], "source_url": row.get("source_url"),
            "published_gpu": row.get("gpu"), "gpu_count": row["gpu_count"],
            "throughput_scope": row.get("throughput_scope"),
            "output_tokens_per_s": row["output_tokens_per_s"], "mode": row.get("mode"),
            "usd_per_gpu_hour": hourly.usd_per_hour, "price_source": hourly.text,
            "published_tokens_per_s_per_gpu": published,
            "published_usd_per_mtok": usd_per_mtok(hourly.usd_per_hour, published),
            "estimated_tokens_per_s_per_gpu": estimated,
            "estimated_usd_per_mtok": usd_per_mtok(hourly.usd_per_hour, estimated),
            "throughput_error": r["metrics"]["throughput"]["error"],
            "weak": r["weak"], "setup": r["setup"], "_row": row,
        }  # fmt: skip
        best = out.get(key)
        if best is None or entry["published_usd_per_mtok"] < best["published_usd_per_mtok"]:
            entry["rows_of_kind"] = (best or {}).get("rows_of_kind", 0) + 1
            out[key] = entry
        else:
            best["rows_of_kind"] += 1
    return out


def run_fleet(
    key: tuple, kinds: dict[str, dict[str, Any]], configs: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """The fleet over the group's kinds at the group's load and TPOT target, each kind in
    its published format; its row per kind."""
    config, isl, osl, engine = key
    shapes = Shapes.from_config(configs[config])
    tpots: dict[str, dict[str, float | None]] = {}
    for k, e in kinds.items():
        row = e["_row"]
        tpots[k] = {"published": row.get("itl_or_tpot_ms"),
                    "estimate_p90": tpot_p90_at_point(row, configs)}  # fmt: skip
    slowest = {k: max((v for v in t.values() if v), default=0.0) for k, t in tpots.items()}
    if not any(slowest.values()):
        return {"reason": "no TPOT, published or estimated, to set a target from"}
    by = max(slowest, key=lambda k: slowest[k])
    rates = {
        k: e["output_tokens_per_s"] * (e["gpu_count"] if e["throughput_scope"] == "per_gpu" else 1)
        / e["setup"]["replicas"] / osl
        for k, e in kinds.items()
    }  # fmt: skip
    workload = Workload(prompt_tokens=isl, output_tokens=osl, concurrency=1, ttft_ms=None,
                        tpot_ms=round(slowest[by], 3))  # fmt: skip
    limits = ENGINE_LIMITS.get(engine, "vllm")
    by_format: dict[tuple[str, str, str], list[str]] = {}
    for k, e in kinds.items():
        by_format.setdefault(formats(e["setup"]), []).append(k)

    def sized(load: Load) -> list[tuple[FleetRow, tuple[str, str, str]]]:
        out = []
        for (dtype, weights, kv), keys in by_format.items():
            gpu = hardware.catalog()[keys[0]]
            sc = Scenario(shapes, gpu, 1, dtype, workload, Configuration(gpu.key), engine=limits)
            found = fleet(FleetRequest(sc, load, tuple(keys), max_gpus=MAX_GPUS,
                                       weights=weights, kv_cache=kv))  # fmt: skip
            out += [(r, (dtype, weights, kv)) for r in found.rows]
        return out

    load = Load(request_rate=round(LOAD_REPLICAS * max(rates.values()), 3))
    load_from = "the published replica rates"
    found = sized(load)
    carried = [r for r, _ in found if r.carries]
    if carried and min(r.replicas for r in carried) < LOAD_REPLICAS // 2:
        # The fleet's replicas carry more than the published ones (a static batch): the
        # load again, as large against the fleet's own largest replica.
        load = Load(request_rate=round(LOAD_REPLICAS * max(r.capacity_request_rate
                                                           for r in carried), 3))  # fmt: skip
        load_from = "the fleet's replica capacities (the published rates left it few replicas)"
        found = sized(load)
    rows: dict[str, dict[str, Any]] = {}
    for r, (dtype, weights, kv) in found:
        at = r.at_load
        rows[r.gpu] = {
            "carries": r.carries, "layout": r.layout, "gpus": r.gpus, "replicas": r.replicas,
            "usd_per_hour": r.usd_per_hour, "price_source": r.price_source,
            "usd_per_mtok": (r.usd_per_million_output_tokens if r.carries
                             and r.usd_per_million_output_tokens is not None else math.inf),
            "tokens_per_s_per_gpu": (load.request_rate or 0.0) * osl / r.gpus if r.gpus else 0.0,
            "headroom": r.headroom(load), "reason": r.reason,
            "users_per_replica_at_load": at.users_per_replica if at else None,
            "tpot_p90_at_load_ms": (at.tpot_p90_seconds * 1e3 if at and at.tpot_p90_seconds
                                    else None),
            "weights": weights, "kv_cache": kv, "model_dtype": dtype,
        }  # fmt: skip
    return {
        "load_requests_per_s": load.request_rate, "load_from": load_from,
        "published_replica_rates": {k: round(v, 4) for k, v in rates.items()},
        "tpot_ms": workload.tpot_ms, "tpot_set_by": by, "tpots": tpots,
        "engine_limits": limits, "rows": rows,
    }  # fmt: skip


def ranks(values: dict[str, float]) -> dict[str, int]:
    order = sorted(values, key=lambda k: values[k])
    return {k: order.index(k) + 1 for k in values}


def verdicts(kinds: dict[str, dict[str, Any]], fleet_rows: dict[str, Any], band: float) -> list:
    """Every pair (A, B) the published cost puts A cheaper: the project's ratio of A to B,
    estimate at the point and fleet, a violation past 1 + band."""
    out = []
    order = sorted(kinds, key=lambda k: kinds[k]["published_usd_per_mtok"])
    for i, a in enumerate(order):
        for b in order[i + 1 :]:
            ka, kb = kinds[a], kinds[b]
            pub = ka["published_usd_per_mtok"] / kb["published_usd_per_mtok"]
            est = ka["estimated_usd_per_mtok"] / kb["estimated_usd_per_mtok"]
            fa = fleet_rows.get(a, {}).get("usd_per_mtok", math.inf)
            fb = fleet_rows.get(b, {}).get("usd_per_mtok", math.inf)
            flt = fa / fb if math.isfinite(fb) else (math.inf if not math.isfinite(fa) else 0.0)
            if not fleet_rows:
                flt = math.nan
            weak = [k["row"] for k in (ka, kb) if k["weak"]]
            # Where each answer departs from the published: its tokens/s per GPU over the
            # published, on each kind.
            off = {
                "estimate": [k["estimated_tokens_per_s_per_gpu"]
                             / k["published_tokens_per_s_per_gpu"] for k in (ka, kb)],
                "fleet": [fleet_rows.get(x, {}).get("tokens_per_s_per_gpu", 0.0)
                          / kinds[x]["published_tokens_per_s_per_gpu"] for x in (a, b)],
            }  # fmt: skip
            out.append({
                "cheaper": a, "dearer": b, "published_ratio": pub,
                "estimate_ratio": est, "estimate_violation": est > 1 + band,
                "fleet_ratio": flt, "fleet_violation": bool(flt > 1 + band),
                "throughput_over_published": off, "weak_rows": weak,
            })  # fmt: skip
    return out


# -- the whole comparison --------------------------------------------------------------


def compare_fleet(rows: list[dict[str, Any]], models: set[str] | None = None) -> dict[str, Any]:
    """Every group: its kinds' published, estimated and fleet $/Mtok, ranks and verdicts."""
    configs = load_configs()
    results = [express(row, configs) for row in rows]
    groups, left = grouped(rows, results)
    chosen: list[tuple[tuple, dict[str, dict[str, Any]]]] = []
    for key, members in groups.items():
        if models and key[0] not in models:
            continue
        kinds = kinds_of(members)
        if len(kinds) >= 2:
            chosen.append((key, kinds))
    used = [e for _, kinds in chosen for e in kinds.values()]
    band = statistics.median(e["throughput_error"] for e in used) if used else 0.0
    out_groups = []
    for key, kinds in chosen:
        fl = run_fleet(key, kinds, configs)
        fleet_rows = fl.get("rows", {})
        pub = ranks({k: e["published_usd_per_mtok"] for k, e in kinds.items()})
        est = ranks({k: e["estimated_usd_per_mtok"] for k, e in kinds.items()})
        flt = ranks({k: fleet_rows.get(k, {}).get("usd_per_mtok", math.inf) for k in kinds})
        for k, e in kinds.items():
            e["rank"] = {"published": pub[k], "estimate": est[k], "fleet": flt[k]}
            e["fleet"] = fleet_rows.get(k)
        config, isl, osl, engine = key
        out_groups.append({
            "config": config, "input_tokens": isl, "output_tokens": osl, "engine": engine,
            "rows": [m["row"]["id"] for m in groups[key]],
            "kinds": [{k: v for k, v in e.items() if k != "_row"}
                      for e in sorted(kinds.values(), key=lambda e: e["published_usd_per_mtok"])],
            "fleet": {k: v for k, v in fl.items() if k != "rows"},
            "pairs": verdicts(kinds, fleet_rows, band),
        })  # fmt: skip
    pairs = [p for g in out_groups for p in g["pairs"]]
    return {
        "band": band,
        "band_rows": len(used),
        "groups": out_groups,
        "left_out": left,
        "violations": {
            "estimate": sum(p["estimate_violation"] for p in pairs),
            "fleet": sum(p["fleet_violation"] for p in pairs),
            "headline": sum(
                (p["estimate_violation"] or p["fleet_violation"]) and not p["weak_rows"]
                for p in pairs
            ),
            "pairs": len(pairs),
        },
    }


# -- the printed report ----------------------------------------------------------------


def _usd(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "—"
    return f"${value:.3g}" if value < 100 else f"${value:,.0f}"


def _ratio(value: float) -> str:
    return "—" if math.isnan(value) else ("∞" if math.isinf(value) else f"×{value:.2f}")


def report(result: dict[str, Any], validation_band: float | None) -> None:
    left = result["left_out"]
    reasons = Counter(
        (why[0] if why else "?").split(":")[0].split(" (")[0]
        for why in left["not_expressible"].values()
    )
    print(f"Published rows left out: {len(left['not_expressible'])} the estimate cannot "
          f"express, {len(left['no_throughput'])} with no published output throughput "
          f"({', '.join(left['no_throughput']) or 'none'}), {len(left['unpriced'])} on kinds "
          "without a price" + (f" ({', '.join(sorted(set(left['unpriced'].values())))})"
                               if left["unpriced"] else ""))  # fmt: skip
    for why, n in reasons.most_common():
        print(f"  {n:3d} × {why}")
    band = result["band"]
    print(f"\nError band: {band:.1%} = the median |estimated ÷ published − 1| of output "
          f"throughput over the {result['band_rows']} rows the groups compare"
          + (f" (the validation's headline median over all its rows: {validation_band:.1%})"
             if validation_band is not None else ""))  # fmt: skip
    for g in result["groups"]:
        fl = g["fleet"]
        head = (f"\n{g['config']}, {g['input_tokens']:,} + {g['output_tokens']:,} tokens, "
                f"{g['engine']} ({len(g['rows'])} rows on {len(g['kinds'])} kinds)")  # fmt: skip
        if "reason" in fl:
            print(head + f"; fleet: {fl['reason']}")
        else:
            print(head + f"; fleet at {fl['load_requests_per_s']:g} requests/s (from "
                  f"{fl['load_from']}), p90 TPOT ≤ {fl['tpot_ms']:.4g} ms (set by "
                  f"{fl['tpot_set_by']}'s row), {fl['engine_limits']} limits")  # fmt: skip
        print(f"  {'kind':9} {'row standing for the kind':58} {'tok/s/GPU':>9} {'$/GPU-h':>7} "
              f"{'pub $/Mtok':>10} {'est $/Mtok':>10} {'fleet $/Mtok':>12} {'rank':5}  "
              "fleet: layout (tok/s/GPU, users/replica, headroom)")  # fmt: skip
        for e in g["kinds"]:
            f = e["fleet"] or {}
            of = f" (of {e['rows_of_kind']})" if e["rows_of_kind"] > 1 else ""
            rank = e["rank"]
            if f.get("carries"):
                room = f"+{f['headroom']:.0%}" if f.get("headroom") is not None else ""
                layout = (f"{f['layout']} ({f['tokens_per_s_per_gpu']:,.0f}, "
                          f"{f['users_per_replica_at_load']}, {room})")  # fmt: skip
            else:
                layout = f"cannot carry it: {f['reason']}" if f else "—"
            print(f"  {e['kind']:9} {(e['row'] + of + (' *' if e['weak'] else '')):58} "
                  f"{e['published_tokens_per_s_per_gpu']:>9,.0f} "
                  f"{e['usd_per_gpu_hour']:>7.2f} {_usd(e['published_usd_per_mtok']):>10} "
                  f"{_usd(e['estimated_usd_per_mtok']):>10} {_usd(f.get('usd_per_mtok')):>12} "
                  f"{rank['published']}/{rank['estimate']}/{rank['fleet']}  {layout}")  # fmt: skip
        for p in g["pairs"]:
            marks = []
            for name in ("estimate", "fleet"):
                mark = f"{name} {_ratio(p[name + '_ratio'])} "
                if p[name + "_violation"]:
                    a, b = p["throughput_over_published"][name]
                    mark += f"VIOLATION (its tok/s/GPU ÷ published: ×{a:.2f} and ×{b:.2f})"
                else:
                    mark += "ok"
                marks.append(mark)
            weak = f"  (weak evidence: {', '.join(p['weak_rows'])})" if p["weak_rows"] else ""
            print(f"    {p['cheaper']} cheaper than {p['dearer']} as published "
                  f"({_ratio(p['published_ratio'])}): {'; '.join(marks)}{weak}")  # fmt: skip
    v = result["violations"]
    print(f"\n{v['pairs']} pairs of kinds: {v['estimate']} violations by the estimate at the "
          f"published points, {v['fleet']} by the fleet (beyond the {band:.1%} band); "
          f"{v['headline']} pairs violated with no weak row in them")  # fmt: skip
    if any(g["kinds"] for g in result["groups"]):
        print("* weak evidence (the row's notes: inferred, unverified, presumed …)")


def _json(value: Any) -> Any:
    """`value` with its infinite and NaN floats as null (strict JSON): an infinite $/Mtok
    is a kind with no throughput, a NaN ratio one with no fleet."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json(v) for v in value]
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", type=Path, help="write the inputs and outputs here")
    parser.add_argument("--models", help="comma-separated config names (default: every group)")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 where a pair with no weak row is violated")  # fmt: skip
    args = parser.parse_args(argv)
    start = time.perf_counter()
    rows = load_rows()
    models = {m.strip() for m in args.models.split(",")} if args.models else None
    result = compare_fleet(rows, models)
    validation = compare(rows)["summary"]["overall"].get("throughput", {})
    result["validation_band"] = validation.get("median_error")
    result["elapsed_seconds"] = time.perf_counter() - start
    report(result, result["validation_band"])
    print(f"Elapsed: {result['elapsed_seconds']:.1f} s")
    if args.json:
        text = json.dumps(_json(result), indent=2, default=str, allow_nan=False)
        args.json.write_text(text + "\n")
        print(f"Wrote {args.json}")
    return 1 if args.check and result["violations"]["headline"] else 0


if __name__ == "__main__":
    sys.exit(main())
