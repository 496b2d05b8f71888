"""Deterministic English-like text for training and testing the demo models.

There is no internet on the boxes this runs on, so the demo family learns from
text made by a small probabilistic grammar: paragraphs about GPUs, inference
serving, weather, cooking and travel. The grammar has real structure (fixed
phrases, numbers with units, and a subject that stays the same within a
paragraph, so a model has to copy it from context) and enough free slots that
held-out paragraphs are new text rather than copies of training ones.

Only the standard library is used; `random.Random(seed)` gives the same text on
every build and every supported Python version.
"""

from __future__ import annotations

import random
import re

TRAIN_SEED = 1234
HELD_OUT_SEED = 98765
TRAIN_CHARS = 320_000
HELD_OUT_CHARS = 16_000

# `name = a | b | c`, continued on lines that start with `|`; every alternative is equally
# likely and "" is the empty one. {name} refers to a rule; {Name} expands `name` and
# capitalises it.
GRAMMAR_TEXT = """\
# GPUs and hardware. {gpu} is the paragraph's card, {other_gpu} any other one.
gpu_name =
  | the H100 | the A100 | the L4 | the L40S | the H200 | the RTX 4090 | the T4 | the A10G
  | the MI300X | the B200 | the V100 | the RTX 3090
gpu = {gpu_name}
other_gpu = {gpu_name} | {gpu_name} | {gpu_name} | a smaller card | an older GPU | two GPUs
mem_type = HBM3 | HBM2e | GDDR6 | GDDR6X | HBM3e
gb = 16 | 24 | 40 | 48 | 80 | 94 | 141 | 192
bandwidth = 0.3 | 0.9 | 1.0 | 1.6 | 2.0 | 3.35 | 4.8 | 5.3
dtype = fp16 | bf16 | fp32 | int8 | int4 | fp8
bits = four | eight | four | eight | two
params = 1 | 3 | 7 | 8 | 13 | 34 | 70 | 405
batch = 1 | 2 | 4 | 8 | 16 | 32 | 64 | 128 | 256
gpu_sentence =
  | {Gpu} has {gb} GB of {mem_type} memory and moves about {bandwidth} terabytes per second.
  | A {params} billion parameter model needs about twice that many gigabytes in {dtype}.
  | At batch size {batch}, {gpu} is {bound} bound, so {fix}.
  | As the batch grows past {batch}, {gpu} moves from memory bound to compute bound.
  | The profiler shows that {kernel} takes most of the time on {gpu}.
  | Quantizing the weights to {bits} bits {quant_effect}.
  | {Gpu} runs {dtype} matrix multiplications {speed_compare} than {other_gpu}.
  | {often} most of the memory on {gpu} goes to {memory_user}, not to the {other_user}.
  | If the model does not fit on {gpu}, {split}.
  | {Gpu} reads every weight once per step, so decode speed follows its memory bandwidth.
  | Compared with {other_gpu}, {gpu} {gpu_compare}.
  | We ran a {params} billion parameter model on {gpu} at batch size {batch}.
bound = memory | memory | compute
fix =
  | a larger batch would use the idle compute | fusing the kernels saves memory traffic
  | quantizing the weights would help the most | a faster clock would not help much
  | moving to {other_gpu} would barely change the latency
kernel =
  | the attention kernel | the matrix multiplication | the softmax | the layer norm
  | the copy between host and device | the embedding lookup
quant_effect =
  | cuts the memory in half | makes decode faster on {gpu} | costs a little accuracy
  | barely changes the perplexity | makes every token cheaper to produce on {gpu}
speed_compare = much faster | a little faster | about as fast | slower
gpu_compare =
  | has more memory but less bandwidth | costs twice as much per hour | is easier to rent
  | uses less power | fits a larger batch
often = "" | "" | often | usually | in practice
memory_user = the key value cache | the weights | the activations
other_user = optimizer | tokenizer | logits | embeddings
split =
  | tensor parallelism splits every layer across {gpus} GPUs
  | pipeline parallelism gives each GPU a few layers
  | we can offload some layers to the CPU and accept a slower decode
gpus = two | four | eight
# Inference serving.
ms = 12 | 18 | 25 | 40 | 60 | 85 | 120 | 250 | 400 | 900
serving_sentence =
  | The first token arrived after {ms} milliseconds, and each later one took {ms}.
  | With continuous batching, a new request joins the batch as soon as {join}.
  | The server keeps the key value cache of each request in {cache_place}.
  | With speculative decoding, a small draft proposes {k} tokens and the target checks them.
  | When the prompt is long, prefill dominates; when the answer is long, decode dominates.
  | The draft model agreed with the target on {pct} percent of the tokens.
  | Under a load of {rps} requests per second, the median latency stayed under {ms} ms.
  | Because many prompts share the same system message, {prefix}.
  | The team measured {metric} before and after {change}.
  | A request with {tokens} prompt tokens spends most of its time in {phase}.
  | {often} the server on {gpu} handles {rps} requests per second at {ms} ms.
join = another request finishes | there is room in the cache | a slot becomes free
cache_place =
  | pages of sixteen tokens | one large block per request | GPU memory
  | a pool that grows and shrinks
k = two | three | four | five | eight
pct = 55 | 62 | 70 | 78 | 84 | 91
rps = 5 | 10 | 20 | 50 | 100 | 200
prefix =
  | caching the prefix saves most of the prefill
  | the server reuses the cached prefix for every request
  | prefix caching cut the time to first token in half
metric =
  | the time to first token | the tokens per second | the peak memory
  | the cost per million tokens | the tail latency
change =
  | quantizing the model | turning on speculative decoding | doubling the batch
  | enabling prefix caching | moving to {other_gpu} | splitting the model across GPUs
tokens = 128 | 512 | 2048 | 8000 | 32000
phase = prefill | decode | the queue | tokenization
# Weather. {city} is the paragraph's place, {other_city} any other one.
city_name =
  | Paris | Lisbon | Oslo | Denver | Kyoto | Nairobi | Toronto | Lima | Berlin | Sydney
  | Madrid | Seoul | Boston | Cairo | Dublin | Mumbai | Quito | Vienna
city = {city_name}
other_city = {city_name}
day = Monday | Tuesday | Wednesday | Thursday | Friday | Saturday | Sunday
when = tomorrow | the weekend | next week | {day} | {day} night | {day} morning
temp = -4 | 2 | 7 | 11 | 15 | 19 | 23 | 27 | 31 | 36
direction = north | south | east | west | northwest | southeast
speed = 5 | 10 | 15 | 20 | 30 | 45 | 60
weather_sentence =
  | In {city}, the morning was {sky_adj} and the temperature reached {temp} degrees by noon.
  | The forecast for {city} on {when} calls for {precip} and a {direction} wind at {speed} km/h.
  | After the storm passed over {city}, the sky cleared and the air smelled of {smell}.
  | It was {temp} degrees in {city} on {day}, which is {compare} than usual for the season.
  | People in {city} carried umbrellas because {reason}.
  | By evening the clouds over {city} turned {color}, and {precip} began to fall.
  | The wind from the {direction} brought {precip} to {city} and {other_city}.
  | {often} {city} is {compare} than {other_city} at this time of year.
sky_adj =
  | cold and clear | grey and damp | bright and warm | foggy | windy | cloudy | humid
  | crisp and sunny
precip =
  | light rain | heavy rain | snow | sleet | scattered showers | thunderstorms
  | a little drizzle | hail
smell = wet earth | salt | pine | cut grass | smoke
compare = warmer | colder | a little warmer | much colder | drier | wetter
reason =
  | the forecast promised rain | the clouds looked heavy | it rained all week
  | {precip} was on the way
color = grey | orange | purple | dark blue | pink
# Cooking. {dish} is the paragraph's dish.
dish_name =
  | soup | risotto | curry | bread | omelette | stew | pasta sauce | pancakes | salad | pie
  | dumplings | fried rice | chili | porridge
dish = {dish_name}
other_dish = {dish_name}
ingredient =
  | onions | garlic | carrots | tomatoes | butter | rice | flour | mushrooms | spinach
  | lentils | potatoes | ginger | eggs | cheese | beans | peppers
amount = a pinch | a spoonful | two cups | half a cup | a handful | a little | three tablespoons
spice = salt | pepper | cumin | paprika | thyme | cinnamon | chili flakes | basil
minutes = 3 | 5 | 8 | 10 | 15 | 20 | 25 | 30 | 45 | 60
cook_verb = chop | slice | fry | mix | whisk | roast | boil | grate
cooking_sentence =
  | To make the {dish}, {cook_verb} the {ingredient} and cook them for {minutes} minutes.
  | Add {amount} of {spice} and stir the {dish} over {heat} heat.
  | {Person} says the secret to a good {dish} is {secret}.
  | Let the {dish} rest for {minutes} minutes before you serve it.
  | If the {dish} tastes flat, add {amount} of {spice} or a squeeze of lemon.
  | First {cook_verb} the {ingredient}, then {cook_verb} the {ingredient}.
  | The {dish} is ready when the {ingredient} are soft and the kitchen smells of {spice}.
  | Serve the {dish} with {ingredient} and {amount} of {spice} on top.
  | {often} the {dish} tastes better the next day, like {other_dish}.
heat = low | medium | high | gentle
person = my grandmother | the chef | our neighbor | the old cookbook | my friend | the baker
secret =
  | patience | fresh {ingredient} | a hot pan | enough {spice} | good butter | letting it rest
# Travel.
hours = two | three | four | six | nine | twelve
clock = 6:15 | 7:40 | 9:05 | 10:30 | 12:00 | 14:20 | 17:45 | 21:10
travel_sentence =
  | The train from {city} to {other_city} leaves at {clock} and takes {hours} hours.
  | We arrived in {city} on {day} and found that {travel_event}.
  | The flight to {city} was delayed because of {precip}.
  | From the station in {city}, it is a short walk to {place}.
  | In {city} we ate {dish} every night and walked along {place}.
  | The bus to {city} was full, so we waited {hours} hours for the next one.
  | {often} the best view of {city} is from {place} at {clock}.
travel_event =
  | the museums were closed | the hotel had lost our booking | the market was open late
  | a festival filled the streets
place =
  | the river | the old harbor | the main square | the cathedral | the park | the night market
  | the hill above the town
"""

TOPICS = (
    "gpu_sentence",
    "serving_sentence",
    "weather_sentence",
    "cooking_sentence",
    "travel_sentence",
)
# Drawn once per paragraph: a paragraph keeps its subject, as real text does.
PINNED = ("gpu", "city", "dish")
_SLOT = re.compile(r"\{(\w+)\}")


def parse_grammar(text: str) -> dict[str, list[str]]:
    grammar: dict[str, list[str]] = {}
    name = ""
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if not line.startswith(" "):
            name, _, line = line.partition("=")
            name = name.strip()
            grammar[name] = []
        alternatives = (a.strip() for a in line.strip().removeprefix("|").split("|"))
        grammar[name] += ["" if a == '""' else a for a in alternatives if a]
    return grammar


GRAMMAR = parse_grammar(GRAMMAR_TEXT)


def _capitalise(text: str) -> str:
    return text[:1].upper() + text[1:]


class _Expander:
    """Expands rules for one paragraph, with that paragraph's pinned choices."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.pins: dict[str, str] = {}
        for name in PINNED:
            self.pins[name] = self._draw(name)

    def expand(self, symbol: str) -> str:
        if symbol in self.pins:
            return self.pins[symbol]
        if symbol not in GRAMMAR:
            return _capitalise(self.expand(symbol.lower()))
        text = self._draw(symbol)
        # "other_city" never names the paragraph's own city ("from Paris to Paris").
        while text == self.pins.get(symbol.removeprefix("other_")):
            text = self._draw(symbol)
        return text

    def _draw(self, symbol: str) -> str:
        text = self.rng.choice(GRAMMAR[symbol])
        return _SLOT.sub(lambda m: self.expand(m.group(1)), text)


def paragraph(rng: random.Random) -> str:
    """A paragraph of three to six sentences on one topic, like a short document."""
    topic = rng.choice(TOPICS)
    expander = _Expander(rng)
    sentences = (" ".join(expander.expand(topic).split()) for _ in range(rng.randint(3, 6)))
    return " ".join(_capitalise(s) for s in sentences)


def generate(seed: int, n_chars: int) -> str:
    """Paragraphs separated by blank lines until the text is at least `n_chars` long."""
    rng = random.Random(seed)
    paragraphs: list[str] = []
    size = 0
    while size < n_chars:
        paragraphs.append(paragraph(rng))
        size += len(paragraphs[-1]) + 2
    return "\n\n".join(paragraphs)


def documents(text: str) -> list[str]:
    """The paragraphs of a text made by `generate`."""
    return text.split("\n\n")


def training_text() -> str:
    return generate(TRAIN_SEED, TRAIN_CHARS)


def held_out_text() -> str:
    """Text from the same grammar and a different seed, less any paragraph that also occurs in
    the training text, so it is new text in the same language."""
    seen = set(documents(training_text()))
    fresh = [p for p in documents(generate(HELD_OUT_SEED, HELD_OUT_CHARS)) if p not in seen]
    return "\n\n".join(fresh)
