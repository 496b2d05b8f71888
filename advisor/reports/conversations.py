"""The conversations section: the prefix cache's hit rate against its capacity, with the
GPUs' KV capacity and the host-memory tier marked, and what the tier is worth.

Built from `Profile.conversations`, the estimate's own section JSON
(`profiling.caching.conversation_estimate`), so the page and `estimate` say the same figures:
the chart's point at the GPUs' capacity is the replay at that capacity (the curve is
replayed with it as a mark), and the tier's point is its own replay. Capacities are
drawn in GiB of KV per engine copy (tokens × the KV bytes of a token), the unit the
host memory is named in; a section this version cannot read is left off the page.
"""

from __future__ import annotations

from typing import Any

from advisor.reports.charts_base import GIB, PALETTE, Figure, base_layout
from profiling.caching.conversation_estimate import hit_check_line
from profiling.projection.engines import DEFAULT_ENGINE, NAMES
from profiling.units import ms, pct, size, tok_s


def section_context(section: dict[str, Any] | None) -> dict[str, Any] | None:
    """The template's context, or None where there is no section or it cannot be read."""
    if not section:
        return None
    try:
        return _context(section)
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None


def _context(section: dict[str, Any]) -> dict[str, Any]:
    if "served" not in section and section.get("hit_check"):
        return _check_only(section)
    served, tier, advice = section["served"], section["host_tier"], section["advice"]
    summary, capacity = served["summary"], served["capacity_tokens"]
    kv_token = served["kv_bytes_per_token"]
    cold, warm = served["cold"], served["warm"]
    recommended = bool(advice["recommended"])
    rows = [
        ("Conversations from", section.get("source") or "the workload's turns"),
        ("Workload", f"{summary['conversations']:,} conversations, {summary['turns']:,} turns, "
                     f"{section['users_per_copy']:,} users per engine copy"),
        ("The mean turn", f"{summary['mean_prompt_tokens']:,.0f} prompt tokens (its history "
                          f"included), {summary['mean_output_tokens']:,.0f} reply tokens"),
        ("KV capacity on the GPUs", _capacity(capacity, kv_token, section)),
        ("Prefix-cache hit rate", f"{pct(served['hit_rate'])} of prompt tokens (room for "
                                  f"everything: {pct(served['reusable_rate'])})"),
        ("Prefill tokens saved", f"{served['prefill_tokens_saved']:,}"),
        ("TTFT", f"{ms(cold['ttft_seconds'])} without the cache → "
                 f"{ms(warm['ttft_seconds'])} with its hits"),
        ("Throughput", f"{tok_s(cold['decode_tokens_per_second'])} → "
                       f"{tok_s(warm['decode_tokens_per_second'])}"),
        ("Host-memory tier", f"{size(tier['host_bytes'])} over {tier['link']['name']} "
                             f"({tier['link']['bytes_per_second'] / 1e9:,.0f} GB/s, "
                             f"{tier['link']['basis']}): hit rate {pct(tier['gpu_hit_rate'])} → "
                             f"{pct(tier['tier_hit_rate'])}"),
        ("On the engine", section["engine_check"]),
    ]  # fmt: skip
    if section.get("engine_offload"):
        rows.append(("Offload on the engine", section["engine_offload"]))
    check = hit_check_line(section)
    rows += [("Hit check on the worker", check)] if check else []
    offload = (f"{advice['setting']} ({advice['expected_effect']['text']})" if recommended
               else advice["why"])  # fmt: skip
    return {
        "basis": section["basis"],
        "rows": rows,
        "recommended": recommended,
        "offload": offload,
        "caveats": list(advice.get("caveats") or []) if recommended else [],
        "notes": list(served.get("notes") or []) + list(tier.get("notes") or []),
        "finding": (f"hit rate {pct(served['hit_rate'])} at the GPUs' KV capacity; offload to "
                    f"host memory {'recommended' if recommended else 'not recommended'}"),
    }  # fmt: skip


def _check_only(section: dict[str, Any]) -> dict[str, Any]:
    """A worker with no GPU named keeps only the hit check: its warm TTFT measured at the
    replay's hit positions against the projection fitted on the worker itself."""
    check = section["hit_check"]
    return {
        "basis": "measured on the worker",
        "rows": [
            ("Conversations from", section.get("source") or "the workload's turns"),
            ("Hit check on the worker", hit_check_line(section)),
            ("Projected interval", check["interval"]),
            ("On the engine", section.get("engine_check") or "not run"),
        ],
        "recommended": False,
        "offload": ("no GPU was named, so neither the prefix cache at a GPU's KV capacity "
                    "nor a host-memory tier was projected; name the GPU kind to see both"),
        "caveats": [],
        "notes": [check["note"]] if check.get("note") else [],
        "finding": "hit check on the worker only (no GPU named)",
    }  # fmt: skip


def _capacity(tokens: int | None, kv_token: int, section: dict[str, Any]) -> str:
    """The capacity and what it rests on: the deployment's precision (which may not be
    the one this run measured, as the memory section's is) and the engine's reserve."""
    if tokens is None:
        return "not limited (no GPU named)"
    kv = "fp8 KV" if section.get("kv_cache") == "fp8" else f"{section.get('dtype', '?')} KV"
    return (f"{tokens:,} tokens ({size(tokens * kv_token)} of {kv}, {kv_token:,} bytes a "
            f"token, per engine copy of {section['tensor_parallel']} GPU(s), after the "
            f"weights and {NAMES[section.get('serving_engine', DEFAULT_ENGINE)]}'s memory "
            "reserve)")  # fmt: skip


def conversation_chart(section: dict[str, Any] | None) -> Figure | None:
    """Hit rate against KV capacity (GiB, log), the GPUs' capacity and the host tier
    marked by lines and by their own replays' points; None without a readable section."""
    try:
        return _chart(section) if section else None
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None


def _chart(section: dict[str, Any]) -> Figure | None:
    served, tier = section["served"], section["host_tier"]
    kv_token = served["kv_bytes_per_token"]
    curve = [(p["capacity_tokens"], p["hit_rate"]) for p in served["curve"]]
    if not curve or kv_token <= 0:
        return None
    host_tokens = tier["host_tokens"]
    if host_tokens > curve[-1][0]:
        # The curve's last capacity holds every block the workload touches: more is flat.
        curve.append((host_tokens, curve[-1][1]))
    gib = kv_token / GIB
    data = [{
        "type": "scatter", "mode": "lines+markers", "name": "hit rate (replayed)",
        "x": [t * gib for t, _ in curve], "y": [r * 100 for _, r in curve],
        "customdata": [t for t, _ in curve], "line": {"color": PALETTE[0]},
        "hovertemplate": "%{x:.3g} GiB (%{customdata:,} tokens): %{y:.1f} %<extra></extra>",
    }]  # fmt: skip
    shapes = []
    gpu = served["capacity_tokens"]
    if gpu is not None:
        shapes.append(_mark(gpu * gib, "your GPUs' KV cache", "#333"))
        data.append(_point("your GPUs", gpu * gib, served["hit_rate"], PALETTE[5], "diamond"))
    reach = max(host_tokens, gpu or 0)
    shapes.append(_mark(host_tokens * gib, f"host tier {size(tier['host_bytes'])}", PALETTE[2]))
    data.append(_point("with the host tier", reach * gib, tier["tier_hit_rate"], PALETTE[2],
                       "square"))  # fmt: skip
    layout = base_layout("Prefix-cache hit rate against KV capacity",
                         "KV cache per engine copy (GiB, log)", "hit rate (% of prompt tokens)",
                         shapes=shapes)  # fmt: skip
    layout["xaxis"]["type"] = "log"
    layout["yaxis"]["range"] = [0, 100]
    return {"data": data, "layout": layout}


def _mark(x: float, label: str, colour: str) -> dict[str, Any]:
    return {
        "type": "line", "x0": x, "x1": x, "yref": "paper", "y0": 0, "y1": 1,
        "line": {"color": colour, "width": 2, "dash": "dash"},
        "label": {"text": label, "textposition": "end"},
    }  # fmt: skip


def _point(name: str, x: float, rate: float, colour: str, symbol: str) -> dict[str, Any]:
    return {
        "type": "scatter", "mode": "markers", "name": name, "x": [x], "y": [rate * 100],
        "marker": {"size": 12, "symbol": symbol, "color": colour},
        "hovertemplate": f"{name}: %{{x:.3g}} GiB, %{{y:.1f}} %<extra></extra>",
    }  # fmt: skip
