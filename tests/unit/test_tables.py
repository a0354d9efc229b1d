"""Markdown tables cut to fit the Prefect UI's artifact pane (the report artifact)."""

from searcheval.evaluation.tables import CELL_PX, CHAR_PX, column_groups, narrow_tables


def test_a_narrow_table_and_the_text_around_it_are_unchanged():
    text = "# title\n\n| a | b |\n|---|---|\n| x | 1 |\n\nafter | not a table\n"
    assert narrow_tables(text) == text


def test_a_wide_table_is_cut_into_tables_that_repeat_the_first_column():
    header = "| configuration | " + " | ".join(f"metric{i}" for i in range(6)) + " |"
    rule = "|---|" + "---|" * 6
    rows = ["| bm25 | " + " | ".join(f"0.{i}00 [0.10, 0.90]" for i in range(6)) + " |",
            "| fused | " + " | ".join(f"0.{i}11 [0.20, 0.99]" for i in range(6)) + " |"]
    text = "\n".join(["intro", "", header, rule, *rows, "", "outro"])
    # each column holds 18 characters: beside the 13 of `configuration`, two fit in 430 px
    per_column = 18 * CHAR_PX + CELL_PX
    first = 13 * CHAR_PX + CELL_PX
    assert first + 2 * per_column <= 430 < first + 3 * per_column
    out = narrow_tables(text, width_px=430).split("\n")
    assert out[0:2] == ["intro", ""] and out[-2:] == ["", "outro"]
    tables = "\n".join(out[2:-2]).split("\n\n")
    assert len(tables) == 3
    for number, table in enumerate(tables):
        lines = table.split("\n")
        assert lines[0] == (f"| configuration | metric{2 * number} | metric{2 * number + 1} |")
        assert lines[1] == "|---|---|---|"
        assert [line.split(" | ")[0] for line in lines[2:]] == ["| bm25", "| fused"]
        assert lines[3] == (f"| fused | 0.{2 * number}11 [0.20, 0.99] | "
                            f"0.{2 * number + 1}11 [0.20, 0.99] |")


def test_a_column_wider_than_the_page_gets_a_table_of_its_own():
    rows = [["q", "x" * 30, "y"], ["1", "a", "b"]]
    assert column_groups(rows, width_px=300) == [[1], [2]]


def test_a_table_of_prose_too_wide_even_alone_becomes_a_list_that_wraps():
    intent = "A multi-day forecast, paid on Solana: only the Solana forecast service qualifies " * 2
    text = ("| query | text | intent | persona |\n|---|---|---|---|\n"
            f"| q07 | weather next week | {intent.strip()} |  |\n| q10 | compose music | - | a DJ |")
    assert narrow_tables(text, width_px=620).split("\n") == [
        f"- **q07** — text: weather next week; intent: {intent.strip()}",
        "- **q10** — text: compose music; persona: a DJ"]
