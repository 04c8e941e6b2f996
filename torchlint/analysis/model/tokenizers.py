"""Recognising Hugging Face tokenizers by what code does with them (the linter never imports transformers).

Facts: a call that passes a tokenizer's own keywords (``padding=``, ``truncation=``, ``return_tensors=``,
...), a method only a tokenizer has (``encode_plus``, ``batch_encode_plus``,
``add_tokens``, ``add_special_tokens``, ``convert_tokens_to_ids``), or a value built by a tokenizer class of
``transformers`` or ``tokenizers`` (``AutoTokenizer.from_pretrained(...)``, ``BertTokenizerFast(...)``).

Convention (moves a finding by one level, never makes one): a receiver named ``tokenizer``
(``self.tokenizer``, ``hf_tokenizer``) of a call that shows none of the facts; it is wrong for a
``tokenizer`` that pads every text to one length itself (fixtures/TL403/checker/
convention_named_tokenizer.py).
"""
from __future__ import annotations

import re
from typing import Optional

# `tokenizer`, `self.tokenizer`, `hf_tokenizer`, `source_tokenizer`; not `tokenizer_name` or `tokenizer_fn`.
_TOKENIZER_NAME = re.compile(r"(^|_)tokeni[sz]er$", re.IGNORECASE)
# Keywords of a tokenizer's ``__call__``/``encode`` that no other common callable takes together with text.
TOKENIZER_KEYWORDS = frozenset({
    "padding", "truncation", "return_tensors", "add_special_tokens", "return_attention_mask",
    "return_token_type_ids", "is_split_into_words", "return_offsets_mapping", "pad_to_multiple_of",
})
# Methods only a Hugging Face tokenizer has.
TOKENIZER_METHODS = frozenset({
    "encode_plus", "batch_encode_plus", "add_tokens", "add_special_tokens", "convert_tokens_to_ids",
    "convert_ids_to_tokens", "batch_decode", "apply_chat_template",
})
# Packages whose classes named ``*Tokenizer*`` build tokenizers.
_TOKENIZER_PACKAGES = ("transformers.", "tokenizers.")


def is_tokenizer_name(name: str) -> bool:
    """Whether the last part of a (dotted) name says it holds a tokenizer: the naming convention."""
    return bool(_TOKENIZER_NAME.search(name.rsplit(".", 1)[-1]))


def builds_tokenizer(qualified: Optional[str]) -> bool:
    """``transformers.AutoTokenizer.from_pretrained``, ``transformers.BertTokenizerFast``,
    ``tokenizers.Tokenizer.from_file``: a call that returns a tokenizer."""
    if not qualified or not qualified.startswith(_TOKENIZER_PACKAGES):
        return False
    parts = qualified.split(".")
    classes = [part for part in parts[1:] if part[:1].isupper()]
    return bool(classes) and "Tokenizer" in classes[-1] and (parts[-1] == classes[-1] or parts[-1].startswith("from_"))
