"""Every statement of searcheval/store/sql.py has a name of its own: a second assignment would
silently replace the first for every caller (two branches once both added SELECT_RUN)."""

import ast
from collections import Counter
from pathlib import Path

SQL = Path(__file__).resolve().parents[2] / "searcheval" / "store" / "sql.py"


def test_no_statement_name_is_assigned_twice():
    names = [target.id for node in ast.parse(SQL.read_text()).body if isinstance(node, ast.Assign)
             for target in node.targets if isinstance(target, ast.Name)]
    assert [name for name, count in Counter(names).items() if count > 1] == []
