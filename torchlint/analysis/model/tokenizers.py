"""Recognising Hugging Face tokenizers by how code names them (the linter never imports transformers)."""
from __future__ import annotations

import re

# `tokenizer`, `self.tokenizer`, `hf_tokenizer`, `source_tokenizer`; not `tokenizer_name` or `tokenizer_fn`.
_TOKENIZER_NAME = re.compile(r"(^|_)tokeni[sz]er$", re.IGNORECASE)


def is_tokenizer_name(name: str) -> bool:
    """Whether the last part of a (dotted) name says it holds a tokenizer."""
    return bool(_TOKENIZER_NAME.search(name.rsplit(".", 1)[-1]))
