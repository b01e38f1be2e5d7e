"""Write fair.csv: Fair's (1978) survey of 6,366 married women, as statsmodels ships it, with a respondent id.

    pip install 'polis[examples]'        # statsmodels
    python examples/fidelity/prepare.py  # writes examples/fidelity/fair.csv

The survey (Redbook magazine, 1974) asked women to rate their marriage on a 5-point scale beside their
age, years married, children, religiousness, education and occupation (statsmodels.datasets.fair).
"""

from __future__ import annotations

from pathlib import Path


def main() -> Path:
    from statsmodels.datasets import fair

    data = fair.load_pandas().data.drop(columns=["affairs"])  # a measure of infidelity: not used here
    data.insert(0, "respondent", range(1, len(data) + 1))
    out = Path(__file__).with_name("fair.csv")
    data.to_csv(out, index=False)
    print(f"{len(data)} respondents written to {out}")
    return out


if __name__ == "__main__":
    main()
