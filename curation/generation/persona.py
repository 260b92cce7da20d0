"""persona_generate: a fictional character, a scenario and a goal for each image.

MultiVerse (Sec. 3.2, App. E): conversations grounded in a persona were more diverse than ones written from
the image alone; the character must never be a real person shown in the image.
"""

from __future__ import annotations

from benchcurate.curation.engine.stage import ModelStageConfig, StageContext, TransformStage
from benchcurate.schemas import Persona, Sample


class PersonaConfig(ModelStageConfig):
    """Prompt version and model only."""


def generate(item: Sample, cfg: PersonaConfig, ctx: StageContext) -> list[Sample]:
    result = ctx.ask("persona", cfg.prompt_version, item, model=cfg.model)
    persona = Persona(**result.value.model_dump())
    return [
        item.model_copy(
            update={"persona": persona, "generated_by": {**item.generated_by, "persona": result.generation}}
        )
    ]


STAGE = TransformStage(
    name="persona_generate",
    config=PersonaConfig,
    generate=generate,
    check=None,
    reasons=(),
    uses_model=True,
    prompts=("persona",),
)
