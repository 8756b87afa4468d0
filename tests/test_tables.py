"""The workflow's CSV tables: written whole or not at all, and refused by name when they are not whole."""

from __future__ import annotations

import pandas as pd
import pytest

from entropy_lens.core.tables import DamagedTableError, check_csv, read_csv_table, write_csv
from entropy_lens.verdicts.table import Expected, paper_table_from_files

TABLE = pd.DataFrame({"model": ["a", "b", "c"], "auc": [0.5, 0.75, 1.0], "note": ["x", "two\nlines", ""]})


@pytest.fixture
def table(tmp_path):
    path = tmp_path / "knn_auc.csv"
    write_csv(TABLE, path)
    return path


def test_a_whole_table_round_trips_with_quoted_newlines(table):
    back = read_csv_table(table, keep_default_na=False)
    assert back.to_dict("list") == TABLE.to_dict("list")
    assert not list(table.parent.glob(".*.tmp"))  # the temporary sibling was renamed into place


def test_a_table_cut_anywhere_inside_a_row_is_refused_naming_file_and_remedy(table):
    data = table.read_bytes()
    # every length but those ending on a row's newline (a cut there leaves a shorter whole table: DVC's hash
    # catches that, entropy-lens verify checks it)
    inside = [n for n in range(1, len(data)) if data[n - 1 : n] != b"\n"]
    assert len(inside) > 30
    for n in inside:
        table.write_bytes(data[:n])
        with pytest.raises(DamagedTableError, match=rf"table {table} is damaged: .*--force {table}\) or dvc pull"):
            read_csv_table(table)


def test_a_row_with_a_field_too_many_is_refused(table):
    table.write_text(table.read_text() + "d,0.1,y,extra\n")
    with pytest.raises(DamagedTableError, match=r"rows \[5\] do not have the header's 3 fields"):
        read_csv_table(table)


def test_an_empty_file_is_refused_but_an_empty_table_is_whole(tmp_path):
    with pytest.raises(DamagedTableError, match="empty"):
        check_csv("")
    write_csv(pd.DataFrame(columns=["a", "b"]), tmp_path / "empty.csv")
    assert list(read_csv_table(tmp_path / "empty.csv").columns) == ["a", "b"]


def test_the_paper_table_refuses_a_truncated_analysis_table(table):
    table.write_bytes(table.read_bytes()[:-4])
    with pytest.raises(DamagedTableError, match=f"table {table} is damaged"):
        paper_table_from_files({"knn": str(table)}, Expected())
