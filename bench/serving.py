"""The serving estimate's scenarios, printed side by side from one run.

    python bench/serving.py

Each scenario runs the library's estimate (datasheet rates, the simulated engine,
the layout search) and prints what an engineer sizing a deployment reads:
1. an 8B on 8× H100 at 64 and at 512 users: every layout's throughput and TPOT,
   the front and the pick (replicas for throughput at many users);
2. an 8B on one H100 with a 4 ms TPOT target: the advice proposes TP on more GPUs;
3. a 70B on one H100: every precision's weights, fit and TPOT (fp8, int8, int4), and TP;
4. disaggregation against aggregated replicas on the same GPUs, low and high load;
5. Mixtral at batch 1 and 64: weight bytes a decode step reads against all experts';
   its layouts of 8× H100 at 512 users, expert parallelism among them;
6. throughput over users and over GPUs (never more than linear; an 8B on H100s and
   Mixtral on H200s), and the wall time of each estimate (goal ≤ 200 ms with the
   layout search);
7. speculative decoding with a draft head, estimated at 1, 64 and 512 users over
   the assumed acceptance range.
Every figure is an estimate on datasheet peaks: none is measured here.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from profiling.advice.build import estimate_report  # noqa: E402
from profiling.config import Workload  # noqa: E402
from profiling.measure.hardware import lookup  # noqa: E402
from profiling.model.shapes import Shapes  # noqa: E402
from profiling.parallel import layouts  # noqa: E402
from profiling.projection.calibration import assumed  # noqa: E402
from profiling.projection.estimate import Deployment, Traffic, project, shipped_configs  # noqa: E402
from profiling.projection.precision import PRECISIONS  # noqa: E402

H100 = lookup("H100")


def shapes(name: str) -> Shapes:
    return Shapes.from_config(shipped_configs()[name])


def advice_lines(name: str, gpus: int, work: Workload, caveats: bool = False) -> None:
    started = time.perf_counter()
    advice, _ = estimate_report(shapes(name), H100, gpus, "bfloat16", work)
    took = (time.perf_counter() - started) * 1e3
    print(f"  advice ({took:.0f} ms): bottleneck {advice.bottleneck}")
    for r in advice.recommendations:
        print(f"    + {r.technique}: {r.setting} — {r.expected_effect.text}")
        for caveat in r.caveats if caveats else []:
            print(f"        · {caveat}")
    for n in advice.not_recommended:
        print(f"    - {n.technique}: {n.why}")


def layout_table(name: str, gpus: int, work: Workload) -> None:
    s = shapes(name)
    started = time.perf_counter()
    found = layouts.search(s, assumed(H100, "bfloat16", s.num_layers), "bfloat16", work, H100, gpus)
    took = (time.perf_counter() - started) * 1e3
    pick = layouts.best(found)
    print(f"\n{name} on {gpus}× H100, {work.prompt_tokens}+{work.output_tokens} tokens, "
          f"{work.concurrency} users (search {took:.0f} ms)")  # fmt: skip
    width = max(len(x.name) for x in found)
    print(f"  {'layout':{width}s} {'tok/s':>8s} {'per GPU':>8s} {'TPOT p50':>9s} {'TTFT p90':>9s}")
    for x in found:
        if not x.fits or x.served is None:
            print(f"  {x.name:{width}s} does not fit")
            continue
        mark = " ← pick" if x is pick else ""
        tpot, ttft = x.served.tpot.p50 * 1e3, x.served.ttft.p90 * 1e3
        print(f"  {x.name:{width}s} {x.throughput:8,.0f} {x.per_gpu:8,.0f} "
              f"{tpot:7.2f}ms {ttft:7.1f}ms{mark}")  # fmt: skip
    print("  front:", ", ".join(x.name for x in layouts.front(found)))


def precisions_70b() -> None:
    s = shapes("llama-3.1-70b")
    print("\nllama-3.1-70b on 1× H100, 512+128 tokens, 4 users: every precision")
    for key in PRECISIONS:
        rates = assumed(H100, key, s.num_layers)
        p = project(s, rates, key, Traffic(512, 128, 4), Deployment(H100, 1))
        one = project(s, rates, key, Traffic(512, 128, 1), Deployment(H100, 1))
        print(f"  {key:17s} weights {p.weights_bytes / 2**30:6.1f} GiB  fits {p.fits!s:5s}  "
              f"TPOT {p.tpot_seconds * 1e3:6.1f} ms at 4 users, {one.tpot_seconds * 1e3:6.1f} ms "
              "at 1")  # fmt: skip
    advice_lines("llama-3.1-70b", 1, Workload(512, 128, 4), caveats=True)


def moe_bytes() -> None:
    s = shapes("mixtral-8x7b")
    every = s.weights_bytes("bfloat16")
    print("\nmixtral-8x7b: weight bytes one decode step reads")
    for batch in (1, 4, 16, 64):
        read = s.weights_read("bfloat16", batch)
        print(
            f"  batch {batch:3d}: {read / 2**30:6.1f} GiB of {every / 2**30:.1f} GiB "
            f"({read / every:.0%}; {s.experts_touched(batch):.2f} of {s.num_experts} experts)"
        )


def scaling() -> None:
    s = shapes("llama-3.1-8b")
    rates = assumed(H100, "bfloat16", s.num_layers)
    alone = project(s, rates, "bfloat16", Traffic(512, 128, 1), Deployment(H100, 1))
    one = alone.decode_tokens_per_second
    print("\nllama-3.1-8b on 1× H100: served throughput over users (ratio to users × one user's)")
    for users in (1, 4, 16, 64, 256):
        served = project(s, rates, "bfloat16", Traffic(512, 128, users), Deployment(H100, 1))
        tput = served.decode_tokens_per_second
        print(f"  {users:4d} users: {tput:8,.0f} tok/s ({tput / (users * one):.2f})")
    work = Workload(512, 128, 256)
    base = layouts.best(layouts.search(s, rates, "bfloat16", work, H100, 1)).throughput
    print("  256 users over GPUs (best layout; ratio to GPUs × one GPU's):")
    for gpus in (1, 2, 4, 8):
        tput = layouts.best(layouts.search(s, rates, "bfloat16", work, H100, gpus)).throughput
        print(f"    {gpus} GPUs: {tput:8,.0f} tok/s ({tput / (gpus * base):.2f})")
    h200, moe = lookup("H200"), shapes("mixtral-8x7b")
    rates = assumed(h200, "bfloat16", moe.num_layers)
    base = layouts.best(layouts.search(moe, rates, "bfloat16", work, h200, 1)).throughput
    print("\nmixtral-8x7b on H200s, 256 users over GPUs (best layout; ratio to GPUs × one's):")
    for gpus in (1, 2, 4, 8):
        pick = layouts.best(layouts.search(moe, rates, "bfloat16", work, h200, gpus))
        print(f"    {gpus} GPUs: {pick.throughput:8,.0f} tok/s "
              f"({pick.throughput / (gpus * base):.2f}) {pick.name}")  # fmt: skip


def speculation() -> None:
    print("\nspeculative decoding estimated (a draft head, acceptance 0.5–0.8 assumed), on H100s")
    for name in ("llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b"):
        gpus = {"llama-3.1-8b": 1, "llama-3.1-70b": 4, "mixtral-8x7b": 2}[name]
        for users in (1, 64, 512):
            advice, _ = estimate_report(shapes(name), H100, gpus, "bfloat16",
                                        Workload(512, 128, users))  # fmt: skip
            said = [r.expected_effect.text for r in advice.recommendations
                    if r.technique == "speculative"]  # fmt: skip
            said += [n.why for n in advice.not_recommended if n.technique == "speculative"]
            print(f"  {name} on {gpus}× H100, {users:3d} users: {said[0] if said else '—'}")


def main() -> None:
    print(__doc__.split("\n")[0])
    for users in (64, 512):
        layout_table("llama-3.1-8b", 8, Workload(512, 128, users))
    advice_lines("llama-3.1-8b", 8, Workload(512, 128, 512))
    print("\nllama-3.1-8b on 1× H100, 512+128 tokens, 64 users, TPOT target 4 ms")
    advice_lines("llama-3.1-8b", 1, Workload(512, 128, 64, tpot_ms=4.0))
    precisions_70b()
    for users, target in ((4, 10.0), (16, 23.0)):
        print(f"\nllama-3.1-70b on 4× H100, 8000+256 tokens, {users} users, "
              f"TPOT target {target} ms")  # fmt: skip
        advice_lines("llama-3.1-70b", 4, Workload(8000, 256, users, tpot_ms=target))
    moe_bytes()
    layout_table("mixtral-8x7b", 8, Workload(512, 128, 512))
    scaling()
    speculation()


if __name__ == "__main__":
    main()
