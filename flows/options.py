"""Command-line options made from an options model (schemas.RunOptions, schemas.EvalOptions): each option is
defined once, as the model's field with its description; the command's flag, its help and its default come from
there, and what the user typed is validated by the model (one line on a mistake, never a traceback).

A `Flag` names the field (or `field.subfield` of a nested model), and, where the command line differs from the
field, its flag name, the type the command line reads, and how a typed value becomes the field's value.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

import typer
import yaml
from pydantic import BaseModel

from benchcurate.curation.core.errors import UserError
from benchcurate.curation.core.errors import validated as validated_fields


@dataclass(frozen=True)
class Flag:
    path: str  # the field, or field.subfield of a nested model
    name: str | None = None  # the flag, default --<field-name-with-dashes>
    reads: Any = None  # what the command line reads; default: the field's own type
    parse: Callable[[Any], Any] | None = None  # the typed value -> the field's value
    metavar: str | None = None
    required: bool = False
    boolean: str | None = None  # a bool flag's spelling, e.g. "--batch/--no-batch" or "--demo"

    @property
    def parameter(self) -> str:
        return self.path.replace(".", "__")

    @property
    def declaration(self) -> str:
        """The flag as typer declares it: its bool spelling (`--batch/--no-batch`), its name, or
        --<field-name-with-dashes>."""
        return self.boolean or self.name or "--" + self.path.split(".")[-1].replace("_", "-")

    @property
    def spelling(self) -> str:
        """The flag as a message names it: `--batch` for `--batch/--no-batch`."""
        return self.declaration.split("/")[0]


def field_of(model: type[BaseModel], path: str):
    """The pydantic FieldInfo at `path` (`candidate.model`: the `model` field of the `candidate` field's model)."""
    owner, *rest = path.split(".")
    info = model.model_fields[owner]
    for part in rest:
        nested = next(
            arg for arg in _arguments(info.annotation) if isinstance(arg, type) and issubclass(arg, BaseModel)
        )
        info = nested.model_fields[part]
    return info


def _arguments(annotation) -> tuple:
    return typing.get_args(annotation) or (annotation,)


def _plain(annotation):
    """The type a field holds, without None; a Literal is read as text and checked by the model."""
    options = (
        [arg for arg in _arguments(annotation) if arg is not type(None)]
        if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union
        else [annotation]
    )
    found = options[0] if len(options) == 1 else str
    return str if typing.get_origin(found) is Literal else found


def help_text(model: type[BaseModel], path: str) -> str:
    """The field's description as a sentence (a nested field's: its owner's, then its own), with the model's
    default where it has a plain one."""
    parts = path.split(".")
    described = [
        (field_of(model, ".".join(parts[:size])).description or "").strip() for size in range(1, len(parts) + 1)
    ]
    text = ": ".join(part for part in described if part)
    text = text[:1].upper() + text[1:]
    text += "" if not text or text.endswith(".") else "."
    default = field_of(model, path).default
    if isinstance(default, str | int | float) and not isinstance(default, bool) and default != "":
        text += f" Default: {default}."
    return text


def _bool_form(flag: Flag, info) -> tuple[Any, Any]:
    """(annotation, default) of a bool flag: `--demo` is off unless given; `--batch/--no-batch` is unset (None)
    unless given when the field's default is None, else starts at the field's default."""
    if "/" not in (flag.boolean or ""):
        return bool, False
    return (Optional[bool], None) if info.default is None else (bool, info.default)  # typer


def parameters(model: type[BaseModel], flags: list[Flag]) -> list[inspect.Parameter]:
    """One keyword parameter per flag, annotated for typer with the field's description as its help."""
    found = []
    for flag in flags:
        info = field_of(model, flag.path)
        reads = flag.reads or _plain(info.annotation)
        if reads is bool:
            annotation, default = _bool_form(flag, info)
        elif flag.required:
            annotation, default = reads, ...
        else:
            annotation, default = Optional[reads], None  # typer reads Optional; None: not given
        option = typer.Option(
            flag.declaration, help=help_text(model, flag.path), metavar=flag.metavar, show_default=False
        )
        found.append(
            inspect.Parameter(
                flag.parameter,
                inspect.Parameter.KEYWORD_ONLY,
                default=default,
                annotation=Annotated[annotation, option],
            )
        )
    return found


def values(flags: list[Flag], given: dict[str, Any]) -> dict[str, Any]:
    """The model's fields (nested for `field.subfield`) from what the command received: a flag left out is left
    out, so the model's default (or, for a run, the earlier attempt's value) applies."""
    found: dict[str, Any] = {}
    for flag in flags:
        value = given.get(flag.parameter)
        if value is None or value == [] or (value is False and "/" not in (flag.boolean or "/")):
            continue
        if isinstance(value, Path):
            value = str(value)
        elif isinstance(value, list):
            value = [str(item) if isinstance(item, Path) else item for item in value]
        if flag.parse is not None:
            value = flag.parse(value)
        target = found
        *owners, last = flag.path.split(".")
        for owner in owners:
            target = target.setdefault(owner, {})
        target[last] = value
    return found


def with_flags(function: Callable, model: type[BaseModel], flags: list[Flag]) -> Callable:
    """`function` (its own parameters, then **options) with the flags of `model` in its signature, for typer."""
    hints = typing.get_type_hints(function, include_extras=True)  # the annotations as objects, not strings
    own = [
        parameter.replace(annotation=hints.get(parameter.name, parameter.annotation))
        for parameter in inspect.signature(function).parameters.values()
        if parameter.kind is not inspect.Parameter.VAR_KEYWORD
    ]
    positional = [parameter for parameter in own if parameter.default is inspect.Parameter.empty]
    keyword = [
        parameter.replace(kind=inspect.Parameter.KEYWORD_ONLY)
        for parameter in own
        if parameter.default is not inspect.Parameter.empty
    ]
    function.__signature__ = inspect.Signature([*positional, *parameters(model, flags), *keyword])
    return function


def spellings(flags: list[Flag]) -> dict[str, str]:
    """Each option's path -> the flag a message names it by (`max_cost_usd` -> `--max-cost`)."""
    return {flag.path: flag.spelling for flag in flags}


def validated(model: type[BaseModel], flags: list[Flag], fields: dict[str, Any]):
    """`model` from the fields `values` made; a mistake is one line naming the flag the user typed, not the field."""
    return validated_fields(model, fields, spellings(flags))


# --- `curate run`'s flags ------------------------------------------------------------------------------------------

MAX_SET_VALUE_CHARS = 100_000
MAX_SET_VALUE_DEPTH = 32


class _NoAliasLoader(yaml.SafeLoader):
    """YAML without anchors and aliases: an alias bomb (each level referring to the one below ten times) expands
    to billions of items when used, so it is refused while parsing."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent) or getattr(self.peek_event(), "anchor", None):
            raise yaml.YAMLError("anchors and aliases (&, *) are not accepted in --set values")
        return super().compose_node(parent, index)


def _depth(value: object) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


def parse_value(pair: str, raw: str) -> object:
    """A --set value as YAML (a scalar, a list, a mapping), within bounds a person would never reach."""
    if len(raw) > MAX_SET_VALUE_CHARS:
        raise UserError(
            f"--set {pair[:60]}...: the value has {len(raw):,} characters; at most "
            f"{MAX_SET_VALUE_CHARS:,} (put long lists in a file the stage reads)"
        )
    try:
        value = yaml.load(raw, Loader=_NoAliasLoader)  # a safe loader, aliases refused
    except yaml.YAMLError as error:
        raise UserError(f"--set {pair[:80]}: the value is not valid YAML ({str(error).splitlines()[0]})") from None
    except RecursionError:
        value = None
    if (value is None and raw.strip() not in ("", "null", "~", "None")) or _depth(value) > MAX_SET_VALUE_DEPTH:
        raise UserError(f"--set {pair[:60]}...: the value nests more than {MAX_SET_VALUE_DEPTH} levels deep")
    return value


def parse_overrides(pairs: list[str]) -> dict[str, dict]:
    """`stage.field=value` pairs into {stage: {field: value}}; values are read as YAML scalars or lists."""
    overrides: dict[str, dict] = {}
    for pair in pairs:
        target, sep, raw = pair.partition("=")
        stage, dot, field = target.partition(".")
        if not sep or not dot or not stage or not field:
            raise UserError(f"--set expects stage.field=value (e.g. image_quality.min_quality_score=4), got '{pair}'")
        overrides.setdefault(stage, {})[field] = parse_value(pair, raw)
    return overrides


RUN_FLAGS = [  # RunOptions' fields as flags: name, description and default come from the model
    Flag("input_path", "--input", reads=Path),
    Flag("run_id"),
    Flag("demo", boolean="--demo"),
    Flag("release_name", "--name"),
    Flag("backend"),
    Flag("base_url"),
    Flag("model"),
    Flag("seed"),
    Flag(
        "overrides", "--set", reads=list[str], parse=lambda pairs: parse_overrides(pairs), metavar="STAGE.FIELD=VALUE"
    ),
    Flag("jobs"),
    Flag("concurrency"),
    Flag("max_cost_usd", "--max-cost"),
    Flag("prices", "--price", reads=list[str], parse=lambda pairs: parse_prices(pairs), metavar="MODEL=IN,OUT"),
    Flag("refresh_cache", boolean="--refresh-cache"),
    Flag("batch", boolean="--batch/--no-batch"),
    Flag("dask_address"),
    Flag("allowed_roots", "--allow-root", reads=list[Path], metavar="DIR"),
    Flag("release", boolean="--release/--no-release"),
    Flag("progress"),
]


def parse_prices(pairs: list[str]):
    from benchcurate.curation.models.pricing import parse_prices as parse

    return parse(pairs)
