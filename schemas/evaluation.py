"""The boundary of `curate eval`: what a user asks for, one judged turn, and the results file."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field, JsonValue, model_validator

from benchcurate.schemas.decision import ModelUsage
from benchcurate.schemas.recipe import MAX_COST_HELP, PRICES_HELP, Price
from benchcurate.schemas.sample import Strict

HistoryMode = Literal["oracle", "self"]
GradingMode = Literal["pairwise", "direct"]


class Endpoint(Strict):
    """One OpenAI-protocol model: the model under test, the judge or a baseline. The key comes from OPENAI_API_KEY."""

    model: str = Field(min_length=1, description="its name, as its server names it")
    base_url: str | None = Field(
        None, description="its OpenAI-protocol base URL (vLLM, Ollama, ...); default https://api.openai.com/v1"
    )


class EvalOptions(Strict):
    """The flags of `curate eval run`, validated once; each description is the flag's help."""

    release: str = Field(description="a release folder (outputs/releases/<name>/<version>)")
    candidate: Endpoint = Field(description="the model under test (with --predictions, the name its results go under)")
    judge: Endpoint = Field(description="the judge (the papers used GPT-4o; ConvBench gpt-3.5-turbo)")
    history: HistoryMode | None = Field(
        None,
        description=(
            "MultiVerse only. oracle (default): the gold conversation before each turn; self: the model's own earlier "
            "answers. ConvBench always scores its three settings, ProBench uses the model's own history, AlignMMBench "
            "the sample's given history"
        ),
    )
    grading: GradingMode | None = Field(
        None,
        description=(
            "ConvBench only. pairwise (default): win rate against the reference conversation; direct: 1-10 ratings "
            "with the reference worth 10"
        ),
    )
    baseline: Endpoint | None = Field(
        None,
        description=(
            "ProBench only: a model whose answers replace the release's baseline answers (served at --base-url unless "
            "--baseline-base-url)"
        ),
    )
    limit: int | None = Field(None, ge=1, description="only the first N samples (samples, not turns)")
    split: str = Field("test", description="the release split to score")
    concurrency: int = Field(8, ge=1, le=512, description="requests in flight at once, per server")
    max_cost_usd: float | None = Field(None, gt=0, description=MAX_COST_HELP)
    prices: dict[str, Price] = Field(default_factory=dict, description=PRICES_HELP)
    predictions: str | None = Field(
        None,
        description=(
            "score the answers a harness produced instead of asking the model: lmms-eval's --log_samples JSONL of a "
            "task `curate export lmms-eval` wrote, or VLMEvalKit's prediction file (<model>_<dataset>.xlsx or .tsv) of "
            "a TSV `curate export vlmevalkit` wrote. The judge still judges here; settings the harness did not run are "
            "left out (counted as unanswered)"
        ),
    )
    refresh_cache: bool = Field(False, description="ask again instead of reusing cached replies")
    batch: bool = Field(
        False,
        description=(
            "send the calls through the Batch API (half price): a round of batches per call a sample waits for, each "
            "up to 24 h; rerun the same command to go on polling"
        ),
    )
    batch_wait_seconds: float = Field(
        600,
        ge=0,
        description=("with --batch: seconds this command polls before it leaves the batches running (exit 5)"),
    )
    batch_poll_seconds: float = Field(15, gt=0)
    max_output_tokens: int = Field(1024, ge=16)
    out: str = Field(
        "outputs/evals",
        description=("results go to OUT/<release>/<version>/<model>/<split>.<setting>.judge-<judge>[.first-N]/"),
    )

    @model_validator(mode="after")
    def _baseline_served_with_candidate(self) -> EvalOptions:
        """A baseline model with no base URL of its own is served where the model under test is."""
        if self.baseline is not None and self.baseline.base_url is None:
            self.baseline = self.baseline.model_copy(update={"base_url": self.candidate.base_url})
        return self


class Judgment(Strict):
    """One judged turn of one sample: the answer, each judge call's raw reply and what was read from it."""

    sample_id: str
    turn: int = Field(ge=0, description="1-based index among the sample's user turns; 0: the whole conversation")
    setting: str | None = Field(
        None, description="the protocol's condition: a history setting, a judging order, a rewrite of the question"
    )
    question: str
    answer: str | None = None
    judge: dict[str, dict[str, JsonValue]] = Field(default_factory=dict, description="judge call -> {raw, read}")
    scores: dict[str, float] = Field(default_factory=dict)
    groups: dict[str, str | None] = Field(default_factory=dict, description="breakdowns: goal, task, ...")
    failure: str | None = Field(None, description="why this turn has no score (counted, never a silent zero)")
    detail: str | None = None


class Interval(Strict):
    low: float
    high: float
    level: float = 0.95
    method: str = "bootstrap over samples"


class Predictions(Strict):
    """Where the answers came from when a harness produced them (`curate eval --predictions`)."""

    harness: Literal["lmms-eval", "vlmevalkit"]
    file: str
    sha256: str
    history: str = Field(description="what the harness showed the model before each question")
    answers: int = Field(description="answers read from the file and matched to the release's questions")


RunStatus = Literal["complete", "partial", "failed"]


class EvalResults(Strict):
    release: str
    version: str
    recipe: str
    protocol: str
    model: str
    judge_model: str
    split: str = "test"
    setting: str = Field(
        "",
        description="the short name of what changes the number besides split, judge and "
        "limit: a history setting, a grading, a baseline",
    )
    limit: int | None = Field(None, description="--limit: only the first N samples were scored")
    rows_in_split: int | None = Field(None, description="samples in the split (a --limit run scored fewer)")
    predictions: Predictions | None = None
    history: str = Field(description="what the model saw before each turn, in the protocol's words")
    grading: str | None = None
    baseline: str | None = Field(None, description="probench: what the model was compared with")
    score: float | None = Field(description="the headline: the paper's own aggregate")
    score_name: str = Field("score", description="what the headline is, in the paper's terms")
    interval: Interval | None = None
    sub_scores: dict[str, JsonValue] = Field(default_factory=dict)
    samples: int
    turns_judged: int
    failures: dict[str, int] = Field(default_factory=dict)
    unanswered: int = Field(
        0,
        description="judged turns a predictions file has no answer for (a setting the "
        "harness did not run): not scored, not failures",
    )
    warnings: list[str] = Field(
        default_factory=list,
        description="what makes the numbers less than they seem, e.g. a judge that favours a position",
    )
    usage: dict[str, ModelUsage] = Field(default_factory=dict, description="model -> calls, tokens, cost")
    cost_usd: float | None = None
    prompts: dict[str, str] = Field(default_factory=dict, description="prompt id@version -> sha256")
    release_checksums_sha256: str = Field(
        description="sha256 of the release's SHA256SUMS, every file of which was "
        "verified before scoring: which bytes were scored"
    )
    release_folder: str | None = Field(None, description="where the release was read (for `curate eval review`)")
    created_at: datetime

    @property
    def status(self) -> RunStatus:
        """failed: nothing scored; partial: --limit, some turns failed or unanswered by a harness, or no headline;
        complete: every turn of the split."""
        if not self.turns_judged:
            return "failed"
        short = self.samples < self.rows_in_split if self.rows_in_split is not None else self.limit is not None
        return "partial" if self.score is None or short or self.failures or self.unanswered else "complete"
