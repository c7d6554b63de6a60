"""Stack files as users write them, with what the real Pulumi CLI made of each.

Each case's ``values`` is what ``pulumi config --json`` (CLI 3.276.0, built by ``make engine``)
printed as each key's ``value``, the text the program receives; ``None`` means the CLI refused the
file, and ``reason`` holds the words of its error, which the offline reader's one-line refusal
repeats. tests/stacks/test_stack_corpus.py holds the offline reader to these records;
tests/engine/test_stack_file_cli.py holds the real CLI to them: both agree, or one test fails.
Objects are compared as JSON values (the CLI sorts keys, as encoding/json does).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Case:
    name: str
    text: bytes
    values: dict[str, str] | None
    reason: str = ""
    secret: tuple[str, ...] = field(default=())


CASES = [
    Case("sexagesimal-and-yaml11-words", b"config:\n  hpc:a: 1:00:00\n  hpc:b: on\n  hpc:c: yes\n  hpc:d: off\n",
         {"hpc:a": "1:00:00", "hpc:b": "on", "hpc:c": "yes", "hpc:d": "off"}),
    Case("nested-times-and-words",
         b"config:\n  hpc:f: {wall: 1:00:00, gluster: on, day: 2026-12-24, n: 08, e: 1e3}\n",
         {"hpc:f": '{"day":"2026-12-24 00:00:00 +0000 UTC","e":1000,"gluster":"on","n":8,"wall":"1:00:00"}'}),
    Case("merge-key-with-override", b"config:\n  hpc:d: &d {a: 1, b: 2}\n  hpc:x:\n    <<: *d\n    b: 3\n",
         {"hpc:d": '{"a":1,"b":2}', "hpc:x": '{"a":1,"b":3}'}),
    Case("merge-sequence-first-wins",
         b"config:\n  hpc:p: &p {a: 1}\n  hpc:q: &q {a: 2, b: 2}\n  hpc:x:\n    <<: [*p, *q]\n    c: 3\n",
         {"hpc:p": '{"a":1}', "hpc:q": '{"a":2,"b":2}', "hpc:x": '{"a":1,"b":2,"c":3}'}),
    Case("tab-after-colon", b"config:\n  hpc:x:\t5\n  hpc:y: {a:\t1}\n", {"hpc:x": "5", "hpc:y": '{"a":1}'}),
    Case("tab-before-comment", b"config:\n  hpc:x: five\t# a comment\n", {"hpc:x": "five"}),
    Case("tab-indents", b"config:\n\thpc:x: 1\n", None, "found character that cannot start any token"),
    Case("latin-1", b"config:\n  hpc:x: caf\xe9\n", None, "incomplete UTF-8 octet sequence"),
    Case("latin-1-mid-file", b"config:\n  hpc:x: caf\xe9 au lait\n", None, "invalid trailing UTF-8 octet"),
    Case("stray-continuation-byte", b"config:\n  hpc:x: \x80\n", None, "invalid leading UTF-8 octet"),
    Case("utf8-bom", b"\xef\xbb\xbfconfig:\n  hpc:x: \xc3\xa9t\xc3\xa9\n", {"hpc:x": "\u00e9t\u00e9"}),
    Case("utf16-bom", "config:\n  hpc:x: \u00e9t\u00e9\n".encode("utf-16"), {"hpc:x": "\u00e9t\u00e9"}),
    Case("nul-byte", b"config:\n  hpc:x: a\x00b\n", None, "control characters are not allowed"),
    Case("duplicate-top", b"config:\n  hpc:x: 1\n  hpc:x: 2\n", None, 'mapping key "hpc:x" already defined at line'),
    Case("duplicate-deep", b"config:\n  hpc:h:\n    - name: a\n      name: b\n", None,
         'mapping key "name" already defined at line'),
    Case("duplicate-quoted-and-plain", b"config:\n  hpc:h: {a: 1, 'a': 2}\n", None, 'mapping key "a" already defined'),
    Case("numbers", b"config:\n  hpc:a: 017\n  hpc:b: 0x10\n  hpc:c: 1_000\n  hpc:d: 1e3\n  hpc:e: 08\n"
         b"  hpc:f: +5\n  hpc:g: .5\n  hpc:h: 0o17\n  hpc:i: 0b101\n  hpc:j: -0\n  hpc:k: 1.50\n",
         {"hpc:a": "15", "hpc:b": "16", "hpc:c": "1000", "hpc:d": "1000", "hpc:e": "8", "hpc:f": "5",
          "hpc:g": "0.5", "hpc:h": "15", "hpc:i": "5", "hpc:j": "0", "hpc:k": "1.5"}),
    Case("big-numbers", b"config:\n  hpc:a: 9223372036854775808\n  hpc:b: 123456789012345678901234\n"
         b"  hpc:c: 0.0000001\n",
         {"hpc:a": "9223372036854775808", "hpc:b": "1.2345678901234569e+23", "hpc:c": "1e-7"}),
    Case("timestamps", b"config:\n  hpc:a: 2026-12-24\n  hpc:b: 2026-12-24T08:00:00Z\n"
         b"  hpc:c: 2026-12-24 08:00:00.50\n  hpc:d: 2026-12-24T08:00:00+02:00\n  hpc:e: 2026-12-24T08:00\n",
         {"hpc:a": "2026-12-24 00:00:00 +0000 UTC", "hpc:b": "2026-12-24 08:00:00 +0000 UTC",
          "hpc:c": "2026-12-24 08:00:00.5 +0000 UTC", "hpc:d": "2026-12-24 08:00:00 +0200 +0200",
          "hpc:e": "2026-12-24T08:00"}),
    Case("nulls", b"config:\n  hpc:x:\n  hpc:y: ~\n  hpc:z: {a: null}\n",
         {"hpc:x": "", "hpc:y": "", "hpc:z": '{"a":null}'}),
    Case("bools", b"config:\n  hpc:a: true\n  hpc:b: True\n  hpc:c: FALSE\n  hpc:d: {x: TRUE}\n",
         {"hpc:a": "true", "hpc:b": "true", "hpc:c": "false", "hpc:d": '{"x":true}'}),
    Case("infinity", b"config:\n  hpc:x: .inf\n", None, "json: unsupported value: +Inf"),
    Case("nan-nested", b"config:\n  hpc:x: {a: .nan}\n", None, "json: unsupported value: NaN"),
    Case("non-string-keys", b"config:\n  hpc:x: {1: a, true: b, 1.5: c}\n",
         {"hpc:x": '{"1":"a","1.5":"c","true":"b"}'}),
    Case("explicit-tags", b'config:\n  hpc:x: !!str 10\n  hpc:y: "10"\n  hpc:z: !!float 1\n  hpc:w: !local text\n',
         {"hpc:x": "10", "hpc:y": "10", "hpc:z": "1", "hpc:w": "text"}),
    Case("wrong-explicit-tag", b"config:\n  hpc:x: !!int ten\n", None, "cannot decode !!str `ten` as a !!int"),
    Case("two-colons", b"config:\n  hpc:a:b: 1\n", None, "could not parse hpc:a:b as a configuration key"),
    Case("no-namespace", b"config:\n  size: 3\n", {"hpc-cluster:size": "3"}),
    Case("block-scalars", b"config:\n  hpc:a: |\n    one\n    two\n  hpc:b: >\n    one\n    two\n",
         {"hpc:a": "one\ntwo\n", "hpc:b": "one two\n"}),
    Case("alias-of-scalar", b"config:\n  hpc:a: &v shared\n  hpc:b: *v\n", {"hpc:a": "shared", "hpc:b": "shared"}),
    Case("list-value", b"config:\n  hpc:l: [1, two, 3.0, {k: v}]\n", {"hpc:l": '[1,"two",3,{"k":"v"}]'}),
    Case("secure-values", b"config:\n  hpc:x: {secure: v1:AAAA:BBBB}\n  hpc:y: plain\n",
         {"hpc:y": "plain"}, secret=("hpc:x",)),
    Case("empty-config", b"config:\n", {}),
    Case("unknown-top-level-key", b"config:\n  hpc:x: 1\nnotes: something\n", {"hpc:x": "1"}),
    # A syntax error's words are the parser's own (the CLI's is libyaml's "did not find expected '-'
    # indicator" at line 2; the offline reader names line 4, column 6): both refuse, one line each.
    Case("bad-indentation", b"config:\n  hpc:hosts:\n    - name: a\n     address: b\n", None, ""),
    Case("unclosed-flow", b"config:\n  hpc:x: {a: 1\n", None, ""),  # syntax: both refuse, in their words
]
