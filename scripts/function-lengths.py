#!/usr/bin/env python3
"""Lists the longest Rust functions of the workspace and fails when one is too long.

Every `fn` with a body (free functions, methods, trait defaults, nested functions) is
measured in lines, from the line of its `fn` keyword to the line of its closing brace.
Braces are matched on a tokenized file, so braces inside strings, raw strings, char
literals and comments do not count. Test code is left out: `target/`, `.git/`, any
`tests/` or `benches/` directory, files named `tests.rs` or `*_tests.rs`, and items under
`#[cfg(test)]` (or a cfg that only holds under test, such as `all(test, ...)`).

Usage: scripts/function-lengths.py [--max 110] [--top 15] [ROOT]
Prints the TOP longest as `LINES  PATH:LINE  NAME`; exits 1, with a one-line message on
stderr, when any function is longer than MAX lines, 0 otherwise. ROOT defaults to the
repository this script is in.
"""

import argparse
import os
import sys
from pathlib import Path

SKIPPED_DIRS = {"target", ".git", "tests", "benches"}
# Prefixes that open a string literal (`r`, `br` and `cr` may be raw: `r#"..."#`).
STRING_PREFIXES = {"b", "c", "r", "br", "cr"}


def tokenize(text):
    """The file's tokens as (kind, value, line), kind one of ident, punct, literal.

    Comments are dropped; strings and chars become one `literal` token each, so no brace
    inside them is seen. Unterminated literals or comments end at the end of the file.
    """
    tokens = []
    i, n, line = 0, len(text), 1

    def scan_quoted(start, quote):
        """Index after the literal whose opening `quote` is at `start`; counts newlines."""
        nonlocal line
        j = start + 1
        while j < n and text[j] != quote:
            if text[j] == "\\":
                j += 1
            if j < n and text[j] == "\n":
                line += 1
            j += 1
        return j + 1

    while i < n:
        ch = text[i]
        if ch == "\n":
            line += 1
            i += 1
        elif ch.isspace():
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            # Block comments nest in Rust.
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    line += text[i] == "\n"
                    i += 1
        elif ch == '"':
            tokens.append(("literal", '""', line))
            i = scan_quoted(i, '"')
        elif ch == "'":
            # A char literal ('x', '\n', '{') or a lifetime / label ('a, 'static).
            if text.startswith("\\", i + 1) or text.startswith("'", i + 2):
                tokens.append(("literal", "''", line))
                i = scan_quoted(i, "'")
            else:
                i += 1
        elif ch.isalpha() or ch == "_":
            j = i
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            word = text[i:j]
            if word in STRING_PREFIXES and j < n and text[j] in "\"#'":
                raw = word.endswith("r")
                if raw and text[j] in "#\"":
                    hashes = 0
                    while j + hashes < n and text[j + hashes] == "#":
                        hashes += 1
                    if j + hashes < n and text[j + hashes] == '"':
                        closing = '"' + "#" * hashes
                        end = text.find(closing, j + hashes + 1)
                        end = n if end < 0 else end + len(closing)
                        tokens.append(("literal", '""', line))
                        line += text.count("\n", i, end)
                        i = end
                        continue
                    if word == "r" and hashes == 1:
                        # A raw identifier: r#type.
                        k = j + 1
                        while k < n and (text[k].isalnum() or text[k] == "_"):
                            k += 1
                        tokens.append(("ident", text[j + 1:k], line))
                        i = k
                        continue
                elif not raw and text[j] in "\"'":
                    tokens.append(("literal", text[j] * 2, line))
                    i = scan_quoted(j, text[j])
                    continue
            tokens.append(("ident", word, line))
            i = j
        elif ch.isdigit():
            j = i
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            tokens.append(("literal", text[i:j], line))
            i = j
        else:
            tokens.append(("punct", ch, line))
            i += 1
    return tokens


def matching(tokens, start, open_, close):
    """Index of the token closing the `open_` at `start` (the last token if none does)."""
    depth = 0
    for k in range(start, len(tokens)):
        kind, value, _ = tokens[k]
        if kind == "punct":
            if value == open_:
                depth += 1
            elif value == close:
                depth -= 1
                if depth == 0:
                    return k
    return len(tokens) - 1


def test_only(tokens, start, end):
    """Whether the cfg predicate in tokens[start:end] holds only under `cfg(test)`."""

    def predicate(k):
        """(test only?, index after the predicate starting at k)."""
        kind, value, _ = tokens[k] if k < end else ("", "", 0)
        if kind != "ident":
            return False, k + 1
        if k + 1 < end and tokens[k + 1][1] == "(":
            close = matching(tokens, k + 1, "(", ")")
            parts, j = [], k + 2
            while j < close:
                result, j = predicate(j)
                parts.append(result)
                if j < close and tokens[j][1] == ",":
                    j += 1
            if value == "all":
                return any(parts), close + 1
            if value == "any":
                return bool(parts) and all(parts), close + 1
            return False, close + 1
        # `key = "value"` predicates, and any bare name other than `test`.
        j = k + 1
        if j < end and tokens[j][1] == "=":
            j += 2
        return value == "test", j

    return predicate(start)[0]


def cfg_test_attribute(tokens, k):
    """For an attribute `#[...]` or `#![...]` at k: (index after it, is it inner (`#!`),
    is it a test-only cfg); None when the `#` at k opens no attribute."""
    j = k + 1
    inner = j < len(tokens) and tokens[j][1] == "!"
    if inner:
        j += 1
    if j >= len(tokens) or tokens[j][1] != "[":
        return None
    close = matching(tokens, j, "[", "]")
    is_cfg = (
        j + 2 < close
        and tokens[j + 1][:2] == ("ident", "cfg")
        and tokens[j + 2][1] == "("
    )
    return close + 1, inner, is_cfg and test_only(tokens, j + 3, close - 1)


def head_end(tokens, k):
    """Index of the first `;` or `{` outside parentheses and brackets from k: the end of
    the item (or statement) starting at k, or the opening of its body. None if none is.

    Attributes and signatures hold no such `;` or `{`, which lets both be skipped.
    """
    depth = 0
    for j in range(k, len(tokens)):
        kind, value, _ = tokens[j]
        if kind == "punct":
            if value in "([":
                depth += 1
            elif value in ")]":
                depth -= 1
            elif depth == 0 and value in ";{":
                return j
    return None


def item_end(tokens, k):
    """Index of the last token of the item (or statement) starting at k."""
    end = head_end(tokens, k)
    if end is None:
        return len(tokens) - 1
    return matching(tokens, end, "{", "}") if tokens[end][1] == "{" else end


def block_end(tokens, k):
    """Index of the `}` closing the block that k is in (the last token at top level)."""
    depth = 0
    for j in range(k, len(tokens)):
        kind, value, _ = tokens[j]
        if kind == "punct" and value == "{":
            depth += 1
        elif kind == "punct" and value == "}":
            if depth == 0:
                return j
            depth -= 1
    return len(tokens) - 1


def functions(text):
    """(name, first line, last line) of every function with a body outside test code."""
    tokens = tokenize(text)
    found = []
    k = 0
    while k < len(tokens):
        kind, value, line = tokens[k]
        if kind == "punct" and value == "#":
            attribute = cfg_test_attribute(tokens, k)
            if attribute:
                after, inner, test = attribute
                if not test:
                    k = after
                elif inner:
                    # `#![cfg(test)]`: the enclosing module (or file) is test code.
                    k = block_end(tokens, after) + 1
                else:
                    k = item_end(tokens, after) + 1
                continue
        if kind == "ident" and value == "fn" and k + 1 < len(tokens):
            name_kind, name, _ = tokens[k + 1]
            if name_kind == "ident":
                body = head_end(tokens, k + 2)
                if body is not None and tokens[body][1] == "{":
                    close = matching(tokens, body, "{", "}")
                    found.append((name, line, tokens[close][2]))
        k += 1
    return found


def rust_files(root):
    """Every non-test .rs file below root, in a stable order."""
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if d not in SKIPPED_DIRS)
        for name in sorted(files):
            if name.endswith(".rs") and name != "tests.rs" and not name.endswith("_tests.rs"):
                yield Path(directory) / name


def main():
    parser = argparse.ArgumentParser(
        description="Lists the longest Rust functions; fails when one is longer than --max."
    )
    parser.add_argument("--max", type=int, default=110, help="longest allowed (lines)")
    parser.add_argument("--top", type=int, default=15, help="how many to list")
    parser.add_argument(
        "root", nargs="?", type=Path, default=Path(__file__).resolve().parent.parent
    )
    args = parser.parse_args()

    lengths = []
    for path in rust_files(args.root):
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as e:
            # A dangling link or an unreadable file: say so, measure the rest.
            print(f"skipped {path}: {e.strerror}", file=sys.stderr)
            continue
        relative = path.relative_to(args.root)
        for name, first, last in functions(text):
            lengths.append((last - first + 1, f"{relative}:{first}", name))
    lengths.sort(key=lambda f: (-f[0], f[1]))

    for length, place, name in lengths[: args.top]:
        print(f"{length:5}  {place}  {name}")
    over = [f for f in lengths if f[0] > args.max]
    if over:
        length, place, name = over[0]
        print(
            f"{len(over)} function(s) longer than {args.max} lines; "
            f"the longest: {name} at {place}, {length} lines",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:
        # The list was piped into a reader that stopped early (`| head`).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
