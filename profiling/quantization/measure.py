"""Measuring one loaded variant: bytes, peak memory, speed and quality.

`Job` holds what every variant of one run shares (the encoded prompts and
evaluation text, the reference's logits and greedy outputs once the
reference is measured, the clock) and measures one variant at a time.
"""

from __future__ import annotations

import gc
import os
from typing import Any

import torch

from profiling.measure import decode_path
from profiling.measure.timing import Clock, measure
from profiling.model.memory import PeakMemory
from profiling.model.prompts import load_eval_text
from profiling.quantization import quality
from profiling.quantization.keep import keep_plan
from profiling.quantization.methods import METHODS, NotAvailable, Request
from profiling.quantization.results import GreedySample, QuantVariant
from profiling.quantization.storage import weight_bytes
from profiling.results import Samples
from profiling.speculative.sweep import encode_prompts

# Single prefills and decode steps are short: at least this many seconds of samples
# per TTFT or decode figure.
MIN_TTFT_SECONDS = 0.05
MIN_DECODE_SECONDS = 0.05


class Job:
    def __init__(
        self, config: Any, loaded: Any, device: str, run_dtype: str, plan: Any, clock: Clock
    ) -> None:
        self.config, self.loaded, self.device = config, loaded, device
        self.plan, self.clock, self.run_dtype = plan, clock, run_dtype
        self.tokenizer = loaded.tokenizer
        self.quality_meaningful = not loaded.info.config_only and self.tokenizer is not None
        vocab = loaded.info.vocab_size
        self.prompt_ids = encode_prompts(self.tokenizer, plan.prompts.prompts, vocab)
        self.eval_ids: list[int] = []
        if self.quality_meaningful:
            text = load_eval_text().text
            self.eval_ids = list(self.tokenizer(text)["input_ids"])[: plan.eval_tokens]
        self.reference: dict[str, Any] | None = None  # logits, nll, greedy of the reference
        self.reference_name: str | None = None
        self.compute_dtype = run_dtype
        self.model: Any = None
        self.compiled: dict[str, Any] = {}  # profiling.measure.decode_path.Compiled of the variant
        self.warnings: list[str] = []
        self.save_dir: str | None = None  # where engine-servable checkpoints go
        self.saved: dict[str, str] = {}

    # -- building ---------------------------------------------------------------------

    def request(self, spec: Any, kept: list[str]) -> Any:
        return Request(
            config=self.config,
            device=self.device,
            compute_dtype=self.compute_dtype,
            kept=kept,
            config_only=self.loaded.info.config_only,
            tokenizer=self.tokenizer,
            calibration_samples=self.plan.calibration_samples,
        )

    def build(self, spec: Any) -> Any:
        method = METHODS[spec.precision]
        plan = keep_plan(self.loaded.model, method, spec)
        request = self.request(spec, plan.modules)
        reason = method.unavailable(spec.precision, request) or plan.same_as_base
        if reason:
            raise NotAvailable(reason)
        built = method.make(method, request)
        built.settings.details.update(plan.details)
        return built

    def free(self) -> None:
        self.model, self.compiled = None, {}
        gc.collect()
        if self.device.startswith("cuda"):
            torch.cuda.empty_cache()

    # -- measuring --------------------------------------------------------------------

    def measure(self, spec: Any, variant: QuantVariant) -> None:
        first = self.reference_name is None
        if first and spec.precision in ("fp32", "bf16", "fp16"):
            self.compute_dtype = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}[
                spec.precision
            ]
        allocated_before = self._allocated()
        built = self.build(spec)
        self.model = built.model
        variant.settings = built.settings
        if self.save_dir and built.settings.method == "gptq" and not spec.variant:
            # Before the first forward, which repacks the weights for this device's kernel.
            self._save(spec.name)
        self._speed(variant)  # first: some kernels repack their weights on the first forward
        weights = weight_bytes(self.model)
        variant.weights_bytes, variant.linear_weights_bytes = weights.total, weights.linear
        self._peak(variant, allocated_before)
        if first:
            variant.is_reference, self.reference_name = True, variant.name
        if self.quality_meaningful:
            self._quality(variant)

    def _save(self, name: str) -> None:
        """The quantized checkpoint as a serving engine loads it (config, safetensors,
        tokenizer), for the engine profile of the same run."""
        folder = os.path.join(self.save_dir, name)
        self.model.save_pretrained(folder)
        if self.tokenizer is not None:
            self.tokenizer.save_pretrained(folder)
        self.saved[name] = folder

    def _allocated(self) -> int:
        if not self.device.startswith("cuda"):
            return 0

        return int(torch.cuda.memory_allocated(self.device))

    def _batch(self, rows: int) -> Any:
        longest = max(self.prompt_ids, key=len)
        return torch.tensor([longest] * rows, device=self.device)

    def _decode_samples(self, rows: int, variant: QuantVariant) -> Samples:
        """One decode step at `rows` rows over the longest prompt, on the baseline's decode
        path (a static cache, compiled on CUDA: torchao's weight-only kernels are fast
        only there), rolled back to the same context before every sample."""
        batch = self._batch(rows)
        with torch.inference_mode():
            prepared = decode_path.prepare(
                self.model, batch, batch[:, -1:], "auto", self.device, self.compiled
            )
            step, setup = decode_path.rolled_back(prepared.step, prepared.cache)
            seconds = measure(
                step,
                warmup=self.plan.warmup,
                repeats=self.plan.repeats,
                clock=self.clock,
                min_seconds=MIN_DECODE_SECONDS,
                setup=setup,
            )
        variant.decode_path, variant.decode_path_reason = prepared.path, prepared.reason
        return seconds

    def _ttft_samples(self) -> Samples:
        prompts = [torch.tensor([ids], device=self.device) for ids in self.prompt_ids]

        def run() -> None:
            with torch.inference_mode():
                for ids in prompts:
                    quality.prefill(self.model, ids)

        seconds = measure(
            run,
            warmup=self.plan.warmup,
            repeats=self.plan.repeats,
            clock=self.clock,
            min_seconds=MIN_TTFT_SECONDS * len(prompts),
        )
        return Samples([s / len(prompts) for s in seconds.samples])

    def _speed(self, variant: QuantVariant) -> None:
        self.compiled = {}  # this variant's model, compiled once on the compiled path
        variant.ttft_seconds = self._ttft_samples()
        variant.seconds_per_token = self._decode_samples(1, variant)
        variant.tokens_per_second = 1 / variant.seconds_per_token.median
        variant.concurrency = self.plan.batch_size
        if self.plan.batch_size > 1:
            samples = self._decode_samples(self.plan.batch_size, variant)
        else:
            samples = variant.seconds_per_token
        variant.concurrency_seconds_per_token = samples
        variant.concurrency_tokens_per_second = variant.concurrency / samples.median

    def _peak(self, variant: QuantVariant, allocated_before: int) -> None:
        """Memory peak of one greedy generation at the concurrency batch: on CUDA the
        peak allocated less what was allocated before this variant was loaded (its
        weights, cache and activations); on CPU the rise of process RSS."""
        batch = self._batch(self.plan.batch_size)
        with PeakMemory(self.device) as peak, torch.inference_mode():
            cache, token = quality.prefill(self.model, batch)
            quality.decode(self.model, cache, token, self.plan.max_new_tokens - 1)
        reading = peak.reading
        variant.peak_method = reading.method
        if reading.peak_bytes is not None:
            variant.peak_bytes = max(0, reading.peak_bytes - allocated_before)

    def _quality(self, variant: QuantVariant) -> None:
        logits = quality.teacher_forced_logits(self.model, self.prompt_ids)
        nll, count = quality.eval_nll(self.model, self.eval_ids)
        greedy = [self._greedy(ids) for ids in self.prompt_ids]
        if self.reference is None:
            self.reference = {"logits": logits, "greedy": greedy}
        ref = self.reference
        variant.perplexity = quality.perplexity(nll, count)
        variant.top1_agreement = quality.top1_agreement(ref["logits"], logits)
        variant.kl_divergence = quality.mean_kl(ref["logits"], logits)
        variant.samples = [
            self._sample(i, ref["greedy"][i], tokens) for i, tokens in enumerate(greedy)
        ]

    def _greedy(self, ids: list[int]) -> list[int]:
        eos = getattr(self.model.generation_config, "eos_token_id", None)
        eos_ids = [] if eos is None else [eos] if isinstance(eos, int) else list(eos)
        return quality.greedy(self.model, ids, self.plan.max_new_tokens, eos_ids)

    def _sample(self, index: int, reference: list[int], tokens: list[int]) -> GreedySample:
        def texts(ids: list[int]) -> list[str]:
            return [self.tokenizer.decode([t]) for t in ids]

        return GreedySample(
            prompt_index=index,
            prompt=self.plan.prompts.prompts[index],
            reference_tokens=reference,
            reference_text=texts(reference),
            tokens=tokens,
            text=texts(tokens),
            first_divergence=quality.first_divergence(reference, tokens),
        )
