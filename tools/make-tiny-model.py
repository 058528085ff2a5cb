#!/usr/bin/env python
"""Build a tiny random-weight Llama model directory for vLLM tests, offline.

The result is a complete Hugging Face model directory that ``vllm serve`` can
load on CPU: ``config.json``, ``generation_config.json``, float32 weights in
``model.safetensors`` and a fast (byte-level BPE) tokenizer.  It is only a few
megabytes and carries no real knowledge: its output is noise, but it is
deterministic noise, which is what tests need (greedy output of TP=1 and TP=2
can be compared token for token).

Nothing is downloaded.  The tokenizer is trained with the ``tokenizers``
library on text that this script generates itself from a fixed seed, and the
weights come from a seeded torch generator, so two runs give the same files.

Meant to run inside the serving image, for instance::

    docker run --rm --network none \
        -v "$PWD/tools/make-tiny-model.py:/make-tiny-model.py:ro" \
        -v "$OUT:/out" \
        dgx-spark-vllm-test/serving-cpu:latest python /make-tiny-model.py /out
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

_STARTED = time.monotonic()  # before the heavy imports, to time them too

# Set before transformers is imported: never reach for the hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

SEED = 1234
VOCAB_SIZE = 512
HIDDEN_SIZE = 128
INTERMEDIATE_SIZE = 256
NUM_LAYERS = 2
NUM_HEADS = 4
NUM_KV_HEADS = 2
HEAD_DIM = HIDDEN_SIZE // NUM_HEADS  # 32: vLLM's CPU attention needs >= 32
MAX_POSITIONS = 256
CORPUS_LINES = 400

BOS, EOS, PAD = "<s>", "</s>", "<pad>"
SPECIAL_TOKENS = [BOS, EOS, PAD]

# A minimal chat template: one line per message, then the assistant's turn.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ message['role'] }}: {{ message['content'] }}\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)

_WORDS = (
    "the a one two three four model token node head worker fabric network "
    "spark cluster serve request answer question tensor parallel rank port "
    "address memory cache engine health test small tiny random weight layer "
    "attention key value hidden size vocabulary byte pair merge text line "
    "is are was runs waits starts stops sends reads writes joins fails "
    "quickly slowly again never always here there and or but with from to of"
).split()


def make_corpus(lines: int, seed: int) -> list[str]:
    """Return ``lines`` pseudo-sentences drawn from a fixed word list.

    A private ``random.Random`` keeps the text independent of any other use of
    the ``random`` module.  Some lines carry digits and punctuation so that
    the tokenizer learns merges for them too.
    """
    rng = random.Random(seed)
    corpus: list[str] = []
    for i in range(lines):
        words = rng.choices(_WORDS, k=rng.randint(5, 14))
        words[0] = words[0].capitalize()
        if i % 5 == 0:
            words.append(str(rng.randint(0, 9999)))
        corpus.append(" ".join(words) + rng.choice([".", ".", "?", "!", ","]))
    return corpus


def train_tokenizer(corpus: list[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE tokenizer and wrap it as a transformers fast tokenizer.

    Every one of the 256 byte symbols is in the initial alphabet, so any text
    can be encoded.  A template post-processor prepends ``<s>`` as Llama
    tokenizers do.
    """
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer=trainer, length=len(corpus))
    bos_id = tok.token_to_id(BOS)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A",
        pair=f"{BOS} $A {BOS} $B",
        special_tokens=[(BOS, bos_id)],
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        model_max_length=MAX_POSITIONS,
        clean_up_tokenization_spaces=False,
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_model(tokenizer: PreTrainedTokenizerFast, vocab_size: int) -> LlamaForCausalLM:
    """Create the Llama model with seeded random weights, in float32."""
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=HIDDEN_SIZE,
        intermediate_size=INTERMEDIATE_SIZE,
        num_hidden_layers=NUM_LAYERS,
        num_attention_heads=NUM_HEADS,
        num_key_value_heads=NUM_KV_HEADS,
        head_dim=HEAD_DIM,
        max_position_embeddings=MAX_POSITIONS,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
        dtype="float32",
    )
    torch.manual_seed(SEED)
    model = LlamaForCausalLM(config).to(torch.float32)
    model.eval()
    return model


def _portable_tokenizer_class(path: Path) -> None:
    """Name the tokenizer class ``PreTrainedTokenizerFast`` in ``path``.

    transformers 5 writes its own class name (``TokenizersBackend``), which
    transformers 4 does not know; both versions load the generic name.
    """
    data = json.loads(path.read_text(encoding="utf-8"))
    data["tokenizer_class"] = "PreTrainedTokenizerFast"
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, build the model directory and list what it holds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="output directory (created if missing)")
    args = parser.parse_args(argv)
    out: Path = args.out

    hf_logging.disable_progress_bar()
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer(make_corpus(CORPUS_LINES, SEED), VOCAB_SIZE)
    if len(tokenizer) > VOCAB_SIZE:
        raise SystemExit(f"tokenizer has {len(tokenizer)} tokens, more than {VOCAB_SIZE}")
    model = build_model(tokenizer, VOCAB_SIZE)
    tokenizer.save_pretrained(out)
    model.save_pretrained(out)
    _portable_tokenizer_class(out / "tokenizer_config.json")
    if not (out / "model.safetensors").is_file():
        raise SystemExit("model.safetensors was not written")

    params = sum(p.numel() for p in model.parameters())
    print(f"built {out}: {params} parameters, {len(tokenizer)} tokens,"
          f" {time.monotonic() - _STARTED:.1f} s (imports included)")
    for path in sorted(out.iterdir()):
        print(f"{path.stat().st_size:>10}  {path.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
