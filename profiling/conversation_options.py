"""The conversation workload's options and the host-memory KV tier's (declared here,
gathered with every other option in `profiling.options`).

A synthetic conversation reuses the workload's own figures: its system prompt is the
shared prefix (`shared_prefix_tokens`), each turn's new user message the rest of the
prompt (`prompt_tokens` − the shared prefix, so the first turn's prompt is
`prompt_tokens`), each reply `output_tokens`; these add the turns and the think time.
"""

from __future__ import annotations

from profiling.option_type import FLOAT, INT, Option

# fmt: off
CONVERSATION = (
    Option("conversation_turns", "workload", INT, None, "Turns per conversation",
           "Optional: requests per conversation, each resending the whole history (the system "
           "prompt is the shared prefix; each turn adds prompt − shared prefix tokens and its "
           "reply). None or 1: independent requests, no conversation.",
           "--conversation-turns", low=1, high=1000, unit="turns", optional=True),
    Option("conversation_think_s", "workload", FLOAT, None, "Think time between turns",
           "Optional: seconds a user takes between a reply and their next turn; other users' "
           "turns meanwhile push the conversation's KV out of the prefix cache. None: none.",
           "--think-seconds", low=0.0, high=86_400.0, unit="s", metavar="S", optional=True),
)
HOST_TIER = (
    Option("host_memory_gib", "hardware", FLOAT, None, "Host memory for the KV cache",
           "Optional: GiB of host memory a KV-cache offload tier may take on each engine "
           "copy. None: the worker's memory.",
           "--host-memory-gib", low=1.0, high=65_536.0, unit="GiB", optional=True,
           metavar="GIB"),
)
# fmt: on
