"""Both backends behind one interface: the offline heuristics and the OpenAI protocol over real HTTP."""

from pathlib import Path
from typing import get_args

import pytest
from PIL import Image

from benchcurate.curation.core.decode import ImageDecodeError
from benchcurate.curation.core.errors import BackendUnavailable, ModelOutputInvalid, UserError
from benchcurate.curation.core.fingerprint import sha256_file
from benchcurate.curation.demo.corpus import data_root, shipped_index
from benchcurate.curation.models import ModelRequest, make_backend
from benchcurate.curation.models.offline import OfflineBackend
from benchcurate.curation.models.openai_backend import OpenAIBackend
from benchcurate.curation.models.prompting import load_prompt
from benchcurate.curation.taxonomy import OTHER_NAMES
from benchcurate.schemas import BackendSpec, ImageRef
from benchcurate.schemas.replies import CategoryReply, ConversationReply, ImageCategoryName, QualityReply
from tests.factories import make_image
from tests.fakes.openai_server import FakeOpenAIServer, Fault
from tests.servers import free_port


def image_ref(path: Path) -> ImageRef:
    with Image.open(path) as opened:
        width, height = opened.size
    return ImageRef(
        path=str(path), sha256=sha256_file(path), size_bytes=path.stat().st_size, width=width, height=height
    )


def request(prompt_id: str, image: ImageRef, seed: int = 1, **variables) -> ModelRequest:
    return ModelRequest(prompt=load_prompt(prompt_id, 1), variables=variables, images=(image,), seed=seed)


SHIPPED_KIND = {Path(entry["file"]).stem: entry["kind"] for entry in shipped_index("rendered")}


@pytest.fixture(scope="module")
def demo_images():
    """The synthetic demo images as shipped in the package, by file stem."""
    folder = Path(str(data_root() / "rendered"))
    return {Path(entry["file"]).stem: image_ref(folder / entry["file"]) for entry in shipped_index("rendered")}


def test_offline_is_the_default_even_with_a_key_in_the_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-be-used")
    assert make_backend(BackendSpec()).label == "offline-heuristic"


def test_offline_outputs_are_labelled_and_deterministic(demo_images):
    backend = OfflineBackend()
    first = backend.complete(request("persona", demo_images["bar_chart-01"], seed=5))
    again = backend.complete(request("persona", demo_images["bar_chart-01"], seed=5))
    other = backend.complete(request("persona", demo_images["bar_chart-01"], seed=6))
    assert first.generation.backend == "offline-heuristic" and first.generation.prompt_id == "persona"
    assert first.value == again.value and first.value != other.value


# What offline.category promises for drawn images: colour blocks are charts, ink rows on white are documents,
# app chrome is a UI, pastel boxes are diagrams, a tall text strip is a receipt, a small flat mark is an icon.
CATEGORY_OF_KIND = {
    "bar_chart": "Charts and Graphs",
    "line_chart": "Charts and Graphs",
    "pie_chart": "Charts and Graphs",
    "scatter_plot": "Charts and Graphs",
    "document": "Documents and Paperwork",
    "table": "Documents and Paperwork",
    "flowchart": "Diagrams and Schematics",
    "tree_diagram": "Diagrams and Schematics",
    "network_diagram": "Diagrams and Schematics",
    "ui_screenshot": "Web Design and User Interfaces",
    "receipt": "Receipts and Invoices",
    "icon": "Brands and Products",
}


def test_offline_category_follows_the_recorded_kind_of_every_shipped_image(demo_images):
    assert set(SHIPPED_KIND.values()) == set(CATEGORY_OF_KIND)  # every shipped kind is checked
    backend = OfflineBackend()
    found = {
        stem: backend.complete(request("image_category", image)).value.category for stem, image in demo_images.items()
    }
    wrong = {stem: category for stem, category in found.items() if category != CATEGORY_OF_KIND[SHIPPED_KIND[stem]]}
    assert not wrong


def test_offline_categories_are_deterministic_labelled_and_in_the_taxonomy(demo_images, tmp_path):
    photos = Path(str(data_root() / "photos"))
    images = [*demo_images.values(), *(image_ref(photos / entry["file"]) for entry in shipped_index("photos"))]
    seeded = set(get_args(ImageCategoryName)) - set(OTHER_NAMES)
    for image in images:
        result = OfflineBackend().complete(request("image_category", image, seed=1))
        copy = tmp_path / f"copy-{Path(image.path).name}"  # same bytes, new path: nothing memoised applies
        copy.write_bytes(Path(image.path).read_bytes())
        again = OfflineBackend().complete(request("image_category", image_ref(copy), seed=2))
        reply = result.value
        assert isinstance(reply, CategoryReply) and again.value == reply, image.path
        assert result.generation.backend == again.generation.backend == "offline-heuristic", image.path
        # a seeded name, or "Others" with a proposed name (photos: their subject is beyond pixel statistics)
        assert reply.category in seeded or (reply.category in OTHER_NAMES and reply.proposed_category), image.path


def test_offline_quality_grades_icons_lowest_and_sharp_charts_high(demo_images):
    backend = OfflineBackend()
    assert backend.complete(request("image_quality", demo_images["icon-01"])).value.quality_score == 1
    assert backend.complete(request("image_quality", demo_images["bar_chart-02"])).value.quality_score >= 4


def test_offline_photo_is_proposed_as_a_new_category(tmp_path):
    photo = Path(__file__).resolve().parents[2] / "curation" / "demo" / "photos" / "coffee.png"
    reply = OfflineBackend().complete(request("image_category", image_ref(photo))).value
    assert reply.category == "Others" and reply.proposed_category == "Photographs"


def test_offline_conversation_alternates_and_checklist_covers_each_user_turn(demo_images):
    backend = OfflineBackend()
    reply = backend.complete(
        request(
            "conversation", demo_images["document-02"], turns="4", utterances="8", character="c", scenario="s", goal="g"
        )
    ).value
    assert isinstance(reply, ConversationReply)
    assert [u.speaker for u in reply.utterances] == ["user", "assistant"] * 4
    text = "\n".join(f"{u.speaker.upper()}: {u.text}" for u in reply.utterances)
    checklist = backend.complete(request("checklist", demo_images["document-02"], conversation=text)).value
    assert [entry.user_turn for entry in checklist.checklists] == [1, 2, 3, 4]


def test_offline_pixel_statistics_are_stored_once_and_read_back_by_later_stages(tmp_path):
    from benchcurate.curation.core.cache import Cache
    from benchcurate.curation.models.image_stats import STATS_NAMESPACE, stats_for_file

    image = image_ref(make_image(tmp_path / "chart.png", 11, (320, 240)))
    cache = Cache(tmp_path / "cache.sqlite")
    first = {
        prompt: OfflineBackend(cache).complete(request(prompt, image)).value
        for prompt in ("image_quality", "image_category", "persona")
    }
    assert cache.count(STATS_NAMESPACE) == 1
    # another process: no memory of the image, and the file is gone; the stored statistics give the same answers
    stats_for_file.cache_clear()
    Path(image.path).unlink()
    again = {
        prompt: OfflineBackend(Cache(tmp_path / "cache.sqlite")).complete(request(prompt, image)).value
        for prompt in first
    }
    assert again == first
    with pytest.raises(ImageDecodeError):  # without the store it would have to decode the missing file
        OfflineBackend().complete(request("image_quality", image))


# --- the OpenAI protocol against a real loopback server ------------------------------------------------


def spec(server, **updates) -> BackendSpec:
    return BackendSpec(
        **{"kind": "openai", "base_url": server.base_url, "model": "fake-vlm", "max_retries": 0, **updates}
    )


@pytest.mark.slow
def test_openai_backend_parses_structured_output_and_sends_a_downscaled_image(tmp_path):
    image = image_ref(make_image(tmp_path / "big.png", 3, (1600, 1200)))
    with FakeOpenAIServer() as server:
        result = OpenAIBackend(spec(server, image_max_side_px=256), api_key="sk-test").complete(
            request("image_quality", image)
        )
        body = server.requests[-1].body
    assert isinstance(result.value, QualityReply) and result.generation.backend == "openai"
    assert body["response_format"]["json_schema"]["name"] == "QualityReply"
    assert body["response_format"]["json_schema"]["strict"] is True
    url = body["messages"][1]["content"][1]["image_url"]["url"]
    assert url.startswith("data:image/jpeg;base64,")
    import base64
    import io

    decoded = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
    assert max(decoded.size) == 256


@pytest.mark.slow
def test_reply_that_fails_validation_is_asked_again_once(tmp_path):
    image = image_ref(make_image(tmp_path / "a.png", 1))
    with FakeOpenAIServer(faults=[Fault(kind="schema_mismatch")]) as server:
        result = OpenAIBackend(spec(server), api_key="k").complete(request("image_quality", image))
        assert server.completions_served == 2
        retry_messages = server.requests[-1].body["messages"]
    assert isinstance(result.value, QualityReply)
    assert "does not match the required JSON schema" in retry_messages[-1]["content"]


@pytest.mark.slow
def test_second_invalid_reply_raises_with_the_raw_reply(tmp_path):
    image = image_ref(make_image(tmp_path / "a.png", 1))
    with FakeOpenAIServer(faults=[Fault(kind="invalid_json", times=2)]) as server:
        with pytest.raises(ModelOutputInvalid) as caught:
            OpenAIBackend(spec(server), api_key="k").complete(request("image_quality", image))
    assert caught.value.raw and "twice" in str(caught.value)


@pytest.mark.slow
def test_server_errors_after_retries_mean_backend_unavailable(tmp_path):
    image = image_ref(make_image(tmp_path / "a.png", 1))
    with FakeOpenAIServer(faults=[Fault(kind="status", status=500, times=5)]) as server:
        with pytest.raises(BackendUnavailable, match="resume"):
            OpenAIBackend(spec(server, max_retries=1), api_key="k").complete(request("image_quality", image))
        assert server.request_count == 2  # the first try and one retry


@pytest.mark.slow
def test_check_fails_fast_on_a_down_server_an_unknown_model_and_a_bad_key():
    dead = BackendSpec(kind="openai", base_url=f"http://127.0.0.1:{free_port()}/v1", model="m", max_retries=0)
    with pytest.raises(BackendUnavailable, match="cannot reach"):
        OpenAIBackend(dead, api_key="k").check()
    with FakeOpenAIServer(expected_api_key="right") as server:
        with pytest.raises(UserError, match="rejected the API key"):
            OpenAIBackend(spec(server), api_key="wrong").check()
        with pytest.raises(UserError, match="not served"):
            OpenAIBackend(spec(server).model_copy(update={"model": "gpt-nope"}), api_key="right").check()
        OpenAIBackend(spec(server), api_key="right").check()


def test_openai_com_without_a_key_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(UserError, match="OPENAI_API_KEY"):
        OpenAIBackend(BackendSpec(kind="openai", model="gpt-4o"))
    with pytest.raises(UserError, match="needs a model"):
        OpenAIBackend(BackendSpec(kind="openai"))


@pytest.mark.slow
def test_a_rejected_request_is_an_item_problem_not_a_server_problem(tmp_path):
    from benchcurate.curation.core.errors import ModelRequestRejected

    image = image_ref(make_image(tmp_path / "a.png", 1))
    with FakeOpenAIServer(faults=[Fault(kind="status", status=400)]) as server:
        with pytest.raises(ModelRequestRejected, match="HTTP 400"):
            OpenAIBackend(spec(server), api_key="k").complete(request("image_quality", image))


@pytest.mark.slow
def test_model_replies_are_cached_so_a_rerun_sends_nothing(tmp_path):
    from benchcurate.curation.core.cache import Cache
    from benchcurate.curation.engine.stage import StageContext
    from benchcurate.schemas import Provenance, Sample

    item = Sample(
        id="x",
        images=[image_ref(make_image(tmp_path / "a.png", 1))],
        provenance=Provenance(source_dataset="t", source_id="1", license="CC0-1.0"),
    )
    cache = Cache(tmp_path / "cache.sqlite")
    with FakeOpenAIServer() as server:

        def ask(seed):
            ctx = StageContext(
                run_dir=tmp_path,
                stage="image_quality",
                run_seed=seed,
                backend=OpenAIBackend(spec(server), cache=cache, api_key="k"),
                cache=cache,
            )
            return ctx.ask("image_quality", 1, item)

        first = ask(0)
        assert server.completions_served == 1
        assert ask(0) == first and server.completions_served == 1  # answered from the cache
        ask(1)
        assert server.completions_served == 2  # a different seed is a different request


@pytest.mark.slow
def test_a_request_keeps_its_slot_until_its_reply_is_stored(tmp_path):
    """A kill can lose at most `concurrency` replies: the next request waits for the last reply to be stored."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    from benchcurate.curation.core.cache import Cache
    from benchcurate.curation.models.openai_backend import REPLY_NAMESPACE

    class SlowCache(Cache):
        seen_at_store: list[int] = []

        def put(self, namespace, key, value):
            if namespace == REPLY_NAMESPACE:
                time.sleep(0.2)  # a slow disk: other threads could send meanwhile if the slot were free
                self.seen_at_store.append(len(server.requests))
            super().put(namespace, key, value)

    image = image_ref(make_image(tmp_path / "a.png", 1))
    with FakeOpenAIServer() as server:
        backend = OpenAIBackend(spec(server, concurrency=1), cache=SlowCache(tmp_path / "cache.sqlite"), api_key="k")
        with ThreadPoolExecutor(3) as pool:
            list(pool.map(lambda seed: backend.complete(request("image_quality", image, seed=seed)), range(3)))
        assert server.completions_served == 3
    assert SlowCache.seen_at_store == [1, 2, 3]


def test_the_openai_base_url_environment_variable_is_read_as_the_sdk_reads_it(monkeypatch):
    from benchcurate.curation.models.identity import backend_identity
    from benchcurate.schemas import BackendSpec

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert backend_identity(BackendSpec(kind="openai", model="m"))["base_url"] == "https://api.openai.com/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1/")
    assert backend_identity(BackendSpec(kind="openai", model="m"))["base_url"] == "http://127.0.0.1:8000/v1"
    given = BackendSpec(kind="openai", model="m", base_url="http://10.0.0.5:8000/v1")
    assert backend_identity(given)["base_url"] == "http://10.0.0.5:8000/v1"  # --base-url wins
