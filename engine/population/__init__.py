"""Populations: members drawn from a template, or one per row of a persona table (Parquet, CSV, JSON Lines)."""

from engine.population.files import Locate, read_population_files, spec_folder
from engine.population.members import MAX_POPULATION_CHARS, MAX_POPULATION_ROWS, SampleKind, draw_value, table_profiles
from engine.population.table import TABLE_SUFFIXES, RowProblem, first_row_problem, read_table

__all__ = [
    "MAX_POPULATION_CHARS",
    "MAX_POPULATION_ROWS",
    "TABLE_SUFFIXES",
    "Locate",
    "RowProblem",
    "SampleKind",
    "draw_value",
    "first_row_problem",
    "read_population_files",
    "read_table",
    "spec_folder",
    "table_profiles",
]
