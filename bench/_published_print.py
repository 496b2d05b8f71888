"""The printed report of `estimate_vs_published.py`: its tables and summaries."""

from __future__ import annotations

from typing import Any

from bench._published_rows import METRICS

METRIC_LABELS = {"ttft": "TTFT", "itl_tpot": "ITL/TPOT", "throughput": "output tok/s"}


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _cell(metric: dict[str, Any] | None) -> str:
    if metric is None:
        return ""
    ratio = "n/a" if metric["ratio"] is None else f"{metric['ratio']:.2f}"
    return f"{_fmt(metric['predicted'])} / {_fmt(metric['published'])} (×{ratio})"


def _print_rows(results: list[dict[str, Any]], title: str) -> None:
    print(title)
    head = (
        f"  {'row':52s} {'engine':12s} {'mode':8s} {'TTFT ms pred/pub':26s} "
        f"{'ITL/TPOT ms pred/pub':24s} {'out tok/s pred/pub':30s} setup"
    )
    print(head)
    for r in results:
        m, s = r["metrics"], r["setup"]
        mode = {"offline": "offline", "online-rate": "rate", "online-concurrency": "conc"}[
            r["mode"]
        ]
        setup = (
            f"{s['gpu']}×{s['tp']}"
            + (f" DP/EP{s['ep']}" if s.get("ep", 1) > 1 else "")
            + (f" ×{s['replicas']}rep" if s["replicas"] > 1 else "")
            + f" {s['dtype']}/kv {s['kv_dtype']}, {s['input_tokens']}/{s['output_tokens']}"
            + f", run≤{s.get('max_running', '-')} (max_seqs {s['max_seqs']})"
        )
        print(
            f"  {r['id']:52s} {r['engine']:12s} {mode:8s} {_cell(m.get('ttft')):26s} "
            f"{_cell(m.get('itl_tpot')):24s} {_cell(m.get('throughput')):30s} {setup}"
        )
        if r["weak"]:
            print(f"  {'':52s} weak: {r['weak']}")
        for note in r["notes"]:
            if note.startswith("the estimate finds no room") or note.startswith("not served"):
                print(f"  {'':52s} ! {note}")


def _print_summary(summary: dict[str, Any], title: str) -> None:
    print(title)
    groups = [("overall", summary["overall"])]
    for group in ("by_family", "by_engine", "by_mode", "by_gpu", "by_dtype"):
        groups += [(f"{group[3:]}: {name}", s) for name, s in summary.get(group, {}).items()]
    for metric in METRICS:
        rows = [(name, s[metric]) for name, s in groups if metric in s]
        if not rows:
            continue
        print(
            f"  {METRIC_LABELS[metric]:26s} {'n':>3s} {'median|err|':>11s} {'median ratio':>12s} "
            f"{'≤20 %':>6s} {'≥×2 off':>7s}  worst|err| (row)"
        )
        for name, x in rows:
            ratio = "-" if x["median_ratio"] is None else f"×{x['median_ratio']:.2f}"
            print(
                f"    {name:24s} {x['rows']:3d} {x['median_error']:11.1%} {ratio:>12s} "
                f"{x['within_20pct']:6d} {x['off_by_2x']:7d}  "
                f"{x['worst_error']:.1%} ({x['worst_row']})"
            )


def report(result: dict[str, Any]) -> None:
    rows = result["rows"]
    strong = [r for r in rows if r["metrics"] and not r["weak"]]
    weak = [r for r in rows if r["metrics"] and r["weak"]]
    c = result["counts"]
    print(
        f"{c['rows']} published rows: {c['compared']} projected and compared "
        f"({c['compared_strong']} headline, {c['compared_weak']} weak), "
        f"{c['not_expressible']} not expressible."
    )
    print(
        "Estimate: datasheet peaks × assumed efficiencies (profiling.projection.calibration."
        "assumed), the simulated engine with the scheduler and memory defaults of the row's "
        "engine (profiling.projection.engines: TensorRT-LLM's for its rows, vLLM's for the "
        "rest) unless the row states its limit; one efficiency table for every engine."
    )
    for check, ok in result["checks"].items():
        print(f"Check: {check}: {ok}")
    print()
    _print_rows(strong, "Compared rows (predicted / published (× ratio)):")
    print()
    _print_rows(weak, "Weak rows (notes: inferred / unverified / ...), reported apart:")
    print()
    print("Not expressible:")
    for r in rows:
        if not r["expressible"]:
            print(f"  {r['id']:52s} {'; '.join(r['reasons'])}")
    print()
    _print_summary(result["summary"], "Error of the headline rows (|predicted/published − 1|):")
    families = sorted({r["family_group"] for r in rows})
    for family in families:
        if family not in result["summary"]["by_family"]:
            total = sum(r["family_group"] == family for r in rows)
            print(f"    family: {family}: none of its {total} rows is comparable (see above)")
    _print_off_by_2x(strong)
    print()
    _print_summary(result["weak_summary"], "Error of the weak rows (apart):")


def _print_off_by_2x(rows: list[dict[str, Any]]) -> None:
    """Each headline figure off by ×2 or more, with the GPU as its source names it (the
    reason such a row misses is in its notes: bench/data/*.jsonl)."""
    off = [(r, metric, m["ratio"]) for r in rows for metric, m in r["metrics"].items()
           if m["ratio"] is not None and not 0.5 < m["ratio"] < 2]  # fmt: skip
    print(f"Headline figures off by ×2 or more: {len(off)}")
    for r, metric, ratio in off:
        print(f"  {r['id']:52s} {METRIC_LABELS[metric]} ×{ratio:.2f}; published on: "
              f"{r['published_gpu']}, projected on the catalog's {r['setup']['gpu']}")  # fmt: skip


def print_lofo(lofo: dict[str, Any]) -> None:
    print("\nLeave one family out (median |error| of output tok/s):")
    for held_out, r in lofo.items():
        e = r["efficiencies"]
        print(
            f"  fitted on {r['fitted_on']:7s} (compute {e['compute']:.0%}, bandwidth "
            f"{e['bandwidth']:.0%}: {r['fit_error']:.1%} there) -> {held_out} "
            f"({r['rows']} rows): {r['held_out_error']:.1%}, against {r['assumed_error']:.1%} "
            "with the assumed efficiencies"
        )
