"""The commands of a Markdown page (README.md, docs/*.md), for the tests that parse them
(tests/test_readme.py, tests/test_readme_budget.py)."""

from __future__ import annotations

import shlex


def readme_commands(text: str) -> list[str]:
    """Each ``attnlab ...`` command of the fenced shell blocks, continuation lines joined,
    comments dropped."""
    commands, shell, lines = [], False, text.replace("\\\n", " ").splitlines()
    for line in lines:
        if line.startswith("```"):
            shell = not shell and line.strip("`").strip() in ("", "bash", "sh")
            continue
        if shell and line.lstrip().startswith("attnlab "):
            commands.append(shlex.join(shlex.split(line, comments=True)))
    return commands
