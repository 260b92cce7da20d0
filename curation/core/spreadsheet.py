"""Cells of the spreadsheets and CSV/TSV files we write, made inert. A cell that starts with =, +, -, @ (or a tab or
a carriage return) is a formula to Excel, LibreOffice and Google Sheets, and model or user text can start with
anything (OWASP, "CSV injection"): such a text is written so that a spreadsheet shows it and never runs it."""

from __future__ import annotations

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def inert(text: str) -> str:
    """A CSV or TSV cell: text a spreadsheet would take for a formula gets a leading single quote, as OWASP
    advises (a spreadsheet then shows it as text; a program reading the file sees the quote)."""
    return "'" + text if text.startswith(FORMULA_START) else text


def append_inert(sheet, values: list) -> None:
    """A row of an openpyxl worksheet in which every text is a string cell: one a spreadsheet would take for a
    formula is stored as text with the quote prefix set (what Excel stores when a leading ' is typed), so it is
    shown, and read back by pandas or openpyxl, exactly as written, and never calculated."""
    sheet.append(values)
    for cell in sheet[sheet.max_row]:
        if isinstance(cell.value, str) and cell.value.startswith(FORMULA_START):
            cell.data_type = "s"
            cell.quotePrefix = True
