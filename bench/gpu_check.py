"""Is the measurement path ready for a GPU? Every check in one run, on any CUDA machine.

Needs torch and transformers only (no Django, no Hub access): the models are
built from configs with random weights, shaped like Llama-3.2-1B and
Llama-3.1-8B (on `--device cpu`, one small shape instead). Prints, side by side:

- copy bandwidth: a device-to-device tensor copy (bytes read + written / time),
  and a read-only pass (a sum) beside it;
- decode: one step at batch 1 and 32 on the profiler's compiled static-cache path
  and on the eager path, bytes moved per second (every weight once per step, plus
  the KV, as the profiler counts them) as a fraction of the copy bandwidth (goal:
  >= 70 % for the 8B shape in bf16 on the compiled path) and of the read-only one;
- prefill: FLOP/s as a fraction of the datasheet peak for the device's dtype;
- bf16 exactness: greedy decoding token by token against one verifying
  forward over the same tokens (what speculative decoding and a batched
  prefill do): agreement, first divergent position, largest logit difference;
- quantization: which methods run here, and why the others do not;
- the wall time of a quick profile of the 1B shape (the small one on CPU),
  through the project's own command line.

    python bench/gpu_check.py                  # CUDA: 1B and 8B shapes, bf16
    python bench/gpu_check.py --device cpu     # the same checks, small shape, < 3 min
    python bench/gpu_check.py --json out.json  # also write every figure
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._gpu_parts import (  # noqa: E402
    SHAPES,
    bandwidths,
    build,
    decode_figures,
    exactness,
    prefill_figures,
    quantization_methods,
    step_ratio,
    write_config,
)

DECODE_GOAL = 0.70  # of copy bandwidth, 8B shape, bf16, compiled path
CPU_WALL_GOAL_S = 180
GPU_WALL_GOAL_S = 300


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--shapes", default="", help="comma-separated of " + ", ".join(SHAPES))
    p.add_argument("--json", default="", help="write every figure to this file")
    p.add_argument("--no-profile", action="store_true", help="skip the quick profile")
    return p.parse_args(argv)


def quick_profile_seconds(shape: str, device: str, folder: Path) -> dict[str, Any]:
    """Wall time of `python -m profiling profile <config> --quick` on a config-only model."""
    config_dir = write_config(shape, folder)
    out = folder / f"{shape}.json"
    argv = [
        sys.executable, "-m", "profiling", "profile", str(config_dir), "--source", "config",
        "--device", device, "--quick", "--json", str(out),
    ]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        return {"shape": shape, "status": "failed", "error": done.stderr.strip()[-500:]}
    profile = json.loads(out.read_text())
    paths = sorted({d.get("path", "eager") for d in profile["decode"]})
    return {"shape": shape, "status": "ran", "wall_s": round(wall, 1), "decode_paths": paths}


def main(argv: list[str] | None = None) -> int:
    import torch

    args = parse_args(argv)
    device = args.device
    if device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device here: run with --device cpu for the CPU smoke run")
        return 2
    started = time.perf_counter()
    shapes = [s for s in args.shapes.split(",") if s] or (
        ["1b", "8b"] if device == "cuda" else ["small"]
    )
    dtype = "bfloat16" if device == "cuda" else "float32"
    report: dict[str, Any] = {"device": device, "dtype": dtype, "shapes": {}}
    report["device_name"] = torch.cuda.get_device_name(0) if device == "cuda" else "CPU"
    copy, read = bandwidths(device)
    report["copy_bandwidth_bytes_per_s"], report["read_bandwidth_bytes_per_s"] = copy, read
    print(
        f"{report['device_name']}: copy bandwidth {copy / 1e9:,.1f} GB/s (read + written), "
        f"read-only {read / 1e9:,.1f} GB/s"
    )
    for shape in shapes:
        subject = build(shape, device, dtype)
        figures: dict[str, Any] = {"parameters": subject.info.num_parameters}
        figures["decode"] = decode_figures(subject, read)
        figures["eager_over_compiled"] = step_ratio(figures["decode"])
        figures["prefill"] = prefill_figures(subject)
        figures["exactness_bf16"] = exactness(shape, device)
        report["shapes"][shape] = figures
        del subject
        if device == "cuda":
            torch.cuda.empty_cache()
        _print_shape(shape, figures)
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as folder:
        report["quantization"] = quantization_methods(device, shapes[0], Path(folder))
        print("\nquantization methods")
        for name, status in report["quantization"].items():
            print(f"  {name:13} {status}")
        if not args.no_profile:
            report["quick_profile"] = quick_profile_seconds(shapes[0], device, Path(folder))
    if "quick_profile" in report:
        q = report["quick_profile"]
        said = f"{q['wall_s']} s, decode path {', '.join(q['decode_paths'])}" if (
            q["status"] == "ran") else f"failed: {q['error']}"  # fmt: skip
        print(f"\nquick profile of the {shapes[0]} shape: {said}")
    report["wall_s"] = round(time.perf_counter() - started, 1)
    goal = GPU_WALL_GOAL_S if device == "cuda" else CPU_WALL_GOAL_S
    print(f"\nthis check took {report['wall_s']} s (goal <= {goal} s)")
    if "8b" in report["shapes"]:
        frac = report["shapes"]["8b"]["decode"]["static-compiled"]["1"]["fraction_of_copy"]
        met = "met" if frac >= DECODE_GOAL else "NOT met"
        print(f"8B bf16 decode at batch 1: {frac:.0%} of copy bandwidth (goal >= 70 %: {met})")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0


def _print_shape(shape: str, f: dict[str, Any]) -> None:
    print(f"\n{shape} shape: {f['parameters'] / 1e9:.2f} B parameters")
    for path, by_batch in f["decode"].items():
        for batch, d in by_batch.items():
            if "error" in d:
                print(f"  decode {path:15} batch {batch:>2}: {d['error']}")
                continue
            print(
                f"  decode {path:15} batch {batch:>2}: {d['ms_per_step']:8.3f} ms/step "
                f"(p10–p90 {d['p10_ms']:.3f}–{d['p90_ms']:.3f}), "
                f"{d['bytes_per_s'] / 1e9:8.1f} GB/s = {d['fraction_of_copy']:.0%} of copy, "
                f"{d['fraction_of_read']:.0%} of read"
                f" [ran {d['path']}{': ' + d['path_reason'] if d['path_reason'] else ''}]"
            )
    ratio = f["eager_over_compiled"]
    if ratio:
        print("  step time eager / static-compiled: " + ", ".join(
            f"batch {b}: {r:.2f}×" for b, r in ratio.items()))  # fmt: skip
    p = f["prefill"]
    peak = f"{p['fraction_of_peak']:.0%} of the datasheet peak" if p["fraction_of_peak"] else (
        "no datasheet peak for this device")  # fmt: skip
    print(f"  prefill {p['tokens']} tokens: {p['flops_per_s'] / 1e12:.2f} TFLOP/s, {peak}")
    e = f["exactness_bf16"]
    first = "none" if e["first_divergence"] is None else f"at token {e['first_divergence']}"
    print(
        f"  bf16 exactness, stepwise against one verifying pass: {e['agreement']:.0%} of "
        f"{e['tokens']} tokens agree, first divergence {first}, largest logit difference "
        f"{e['max_abs_logit_diff']:.3g} (logit scale {e['logit_scale']:.3g})"
    )


if __name__ == "__main__":
    raise SystemExit(main())
