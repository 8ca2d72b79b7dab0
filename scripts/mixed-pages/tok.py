"""o200k_base tokenizer loaded from the rank file shipped in the tiktoken-rs crate (no download)."""
import os, tiktoken
from tiktoken.load import load_tiktoken_bpe
_HERE = os.path.dirname(os.path.abspath(__file__))
_CANDIDATES = [os.environ.get("O200K_FILE", ""), os.path.join(_HERE, "..", "raw", "o200k_base.tiktoken"),
               "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/tiktoken-rs-0.12.1/assets/o200k_base.tiktoken"]
_RANKS = next(p for p in _CANDIDATES if p and os.path.exists(p))
_PAT = "|".join([
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""", r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""", r"""\s*[\r\n]+""", r"""\s+(?!\S)""", r"""\s+""",
])
ENC = tiktoken.Encoding(name="o200k_base", pat_str=_PAT, mergeable_ranks=load_tiktoken_bpe(_RANKS),
                        special_tokens={"<|endoftext|>": 199999, "<|endofprompt|>": 200018})
def ntok(s: str) -> int:
    return len(ENC.encode_ordinary(s))
