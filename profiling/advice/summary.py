"""The profile and its advice as text for a terminal: the CLI's summary tables, its numbers through
`profiling.units` as on the report."""

from __future__ import annotations

from profiling.advice.text import render_advice
from profiling.caching.conversation_estimate import render_conversations
from profiling.profile import Profile
from profiling.units import pct, size


def _table(title: str, headers: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    out = ["", title, "  " + "  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True))]
    out += ["  " + "  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return out


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.2f}"


def _header(p: Profile) -> list[str]:
    m, e = p.model, p.environment
    weights = "random weights, " if m.config_only else ""
    return [
        f"Model   {m.name} ({m.source}, {m.architecture}, {weights}"
        f"{m.num_parameters / 1e6:,.1f} M parameters, {m.num_layers} layers, "
        f"{m.num_attention_heads} heads / {m.num_key_value_heads} KV heads × {m.head_dim})",
        f"Device  {e.device}: {e.device_name} ({e.dtype}; torch {e.torch}, "
        f"transformers {e.transformers}, {e.torch_threads} threads)",
    ]


def _memory_lines(p: Profile) -> list[str]:
    mem = p.memory
    by_dtype = ", ".join(f"{k} {size(v)}" for k, v in mem.weights_bytes_by_dtype.items())
    lines = [
        "",
        "Memory",
        f"  weights               {size(mem.weights_bytes)} ({by_dtype})",
        f"  KV cache per token    {size(mem.kv_cache_bytes_per_token)} measured, "
        f"{size(mem.kv_cache_bytes_per_token_computed)} by formula",
        f"  peak during prefill   {size(mem.peak_prefill_bytes)} ({mem.peak_prefill_method}, "
        f"{mem.peak_prefill_prompt_tokens} tokens × batch {mem.peak_prefill_batch_size})",
    ]
    fit = mem.fit
    if fit is not None:
        verdict = "fits" if fit.fits else "does NOT fit"
        need, usable = size(fit.required_bytes), size(fit.available_bytes)
        lines.append(
            f"  fit on {fit.gpu_count}× {fit.gpu_kind}: {verdict}, needs {need} of {usable} "
            f"usable; at most {fit.max_concurrency:,} requests of {fit.context_tokens} tokens"
        )
    return lines


def _prefill_rows(p: Profile) -> list[list[str]]:
    return [
        [
            str(x.prompt_tokens),
            str(x.batch_size),
            _ms(x.seconds.median),
            f"{_ms(x.seconds.p10)}-{_ms(x.seconds.p90)}",
            f"{x.tokens_per_second:,.0f}",
            f"{x.achieved_flops_per_second / 1e12:,.3f}",
            pct(x.fraction_of_peak),
        ]
        for x in p.prefill
    ]


def _decode_rows(p: Profile) -> list[list[str]]:
    return [
        [
            str(x.batch_size),
            str(x.context_tokens),
            _ms(x.seconds_per_token.median),
            f"{_ms(x.seconds_per_token.p10)}-{_ms(x.seconds_per_token.p90)}",
            f"{x.tokens_per_second:,.0f}",
            f"{x.achieved_bytes_per_second / 1e9:,.1f}",
            pct(x.fraction_of_peak),
        ]
        for x in p.decode
    ]


def render_summary(p: Profile) -> str:
    """The human-readable report `profile` prints."""
    lines = _header(p) + _memory_lines(p)
    lines += _table(
        "Prefill (one forward pass, last-token logits)",
        ["tokens", "batch", "median ms", "p10-p90 ms", "tok/s", "TFLOP/s", "of peak"],
        _prefill_rows(p),
    )
    lines += _table(
        "Decode (one step, one token per row)",
        ["batch", "context", "ms/step", "p10-p90 ms", "tok/s", "GB/s", "of peak"],
        _decode_rows(p),
    )
    lines += [f"  decode path: {line}" for line in p.decode_paths()]
    if p.verdict:
        lines += ["", "Verdict", f"  {p.verdict.summary}", f"  basis: {p.verdict.basis}"]
    if p.advice:
        lines += render_advice(p.advice)
    if p.conversations:
        lines += render_conversations(p.conversations)
    if p.warnings:
        lines += ["", "Warnings"] + [f"  - {w}" for w in p.warnings]
    if p.phase_seconds:
        lines += ["", f"Time spent: {p.time_spent()}"]
    return "\n".join(lines)


# -- devices --------------------------------------------------------------------
