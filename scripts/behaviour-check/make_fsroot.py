#!/usr/bin/env python3
"""The fixed tree server-filesystem serves: make_fsroot.py DIR (deterministic)."""
import os
import sys

root = sys.argv[1]
os.makedirs(os.path.join(root, "docs"))
os.makedirs(os.path.join(root, "src"))


def write(rel, text):
    with open(os.path.join(root, rel), "w", encoding="utf-8", newline="\n") as f:
        f.write(text)


# Small text files (a.txt over dedup's min_body_bytes of 512, so repeats are referenced).
write("a.txt", "".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(1, 21)))
write("b.txt", "just a short note\n")
write("README.md", "# fsroot\n\nA fixed tree for devboy's behaviour baseline.\n\nSee docs/guide.md.\n")
write("docs/guide.md", "# Guide\n\n" + "".join(
    f"## Section {i}\n\nParagraph {i} explains step {i} of the procedure in a few words.\n\n" for i in range(1, 16)))
write("docs/api.md", "# API\n\n" + "".join(f"- `fn_{i}(x: u32) -> u32`: returns x + {i}\n" for i in range(1, 31)))
write("src/lib.rs", "".join(f"pub fn f{i}() -> u32 {{ {i} }}\n" for i in range(1, 41)))

# One big file: 3000 lines, varied enough not to compress to nothing.
big = []
for i in range(1, 3001):
    big.append(f"{i:04d} record id={i} group={i % 17} value={(i * 7919) % 10007} status={'ok' if i % 5 else 'retry'}\n")
write("big.txt", "".join(big))

# Repeated content: the same block many times over.
block = "".join(f"repeat line {j}: identical content in every block\n" for j in range(5))
write("repeated.txt", "".join(f"=== block {k} ===\n" + block for k in range(60)))
