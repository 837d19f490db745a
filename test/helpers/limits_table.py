"""The table of reading limits in docs/participants.md, made from ``evaluation/readers/limits.py``
(each constant, its value and its comment), so that the documented limits are the enforced ones:

    python test/helpers/limits_table.py     # rewrite the table between the limits markers

``test_limits.py`` fails when the table and the module disagree.
"""

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODULE = ROOT / "evaluation" / "readers" / "limits.py"
DOCS = ROOT / "docs" / "participants.md"
START, END = "<!-- limits:start -->", "<!-- limits:end -->"


_BYTES = ("BYTES", "MEMORY", "STEP", "SLACK", "SKIP", "HEADER", "OFFSET")


def _human(name: str, value: int) -> str:
    """Bytes in binary units, counts as numbers (powers of two written so)."""
    if any(word in name for word in _BYTES):
        for shift, unit in ((40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")):
            if value >= 1 << shift and value % (1 << shift) == 0:
                return f"{value >> shift} {unit}"
    elif value >= 1024 and value & (value - 1) == 0:
        return f"2^{value.bit_length() - 1}"
    return f"{value:,}".replace(",", " ")


def rows() -> list[tuple[str, str, str, str]]:
    """(section, name, value, meaning) for every constant of the module, in its order."""
    namespace: dict = {}
    source = MODULE.read_text()
    exec(compile(source, str(MODULE), "exec"), namespace)
    found, section = [], ""
    for line in source.splitlines():
        if line.startswith("# --- "):
            section = line.removeprefix("# --- ")
            continue
        if "=" not in line or line.startswith((" ", "#", '"')):
            continue
        name = line.split("=", 1)[0].strip()
        if not name.isupper():
            continue
        comment = line.split("#", 1)[1].strip() if "#" in line else ""
        ast.parse(line)  # one statement per line
        found.append((section, name, _human(name, namespace[name]), comment))
    return found


def table() -> str:
    lines = ["| limit | value | what it bounds |", "|---|---|---|"]
    section = None
    for group, name, value, meaning in rows():
        if group != section:
            lines.append(f"| **{group}** | | |")
            section = group
        meaning = meaning.replace("|", "\\|")
        lines.append(f"| `{name}` | {value} | {meaning} |")
    return "\n".join(lines)


def documented() -> str:
    text = DOCS.read_text()
    return text.split(START, 1)[1].split(END, 1)[0].strip()


def main() -> int:
    text = DOCS.read_text()
    before, rest = text.split(START, 1)
    _, after = rest.split(END, 1)
    DOCS.write_text(f"{before}{START}\n{table()}\n{END}{after}")
    print(f"{len(rows())} limits written to docs/participants.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
