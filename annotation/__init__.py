"""Label Studio integration, the only package that talks to it: the local server (`server.py`), the people
(`team.py`), review rounds (`review.py`: push, pull; `page.py`: what reviewers see) and the judge's calls redone by
people (`judge_review.py`). What a pull decides is `curation/review/policy.py`."""
