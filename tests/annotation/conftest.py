"""Fixtures of the Label Studio tests."""

import pytest

from benchcurate.annotation import server
from tests.servers import free_port, starts_server


@pytest.fixture(scope="module")
@starts_server
def label_studio(tmp_path_factory):
    """A Label Studio of this module's own on loopback: (data folder, server info, admin token)."""
    data = tmp_path_factory.mktemp("ls")
    info, token = server.up(data, free_port())
    yield data, info, token
    server.down(data)


@pytest.fixture(scope="module")
def person(label_studio):
    """`person(email, role)`: someone added as `curate ls user add` does, logged in through the login form; returns
    (their user id, a Label Studio client with their own token), so what they post is theirs."""
    import httpx
    from label_studio_sdk import LabelStudio

    from benchcurate.annotation import review, team

    data, info, token = label_studio
    made = {}

    def make(email: str, role: str = "annotator"):
        if email not in made:
            with pytest.MonkeyPatch.context() as patch:
                patch.setenv(team.PASSWORD_ENV, f"pw-{email}-0123")
                patch.delenv("LABEL_STUDIO_URL", raising=False)
                patch.delenv("LABEL_STUDIO_API_KEY", raising=False)
                added = team.add_user(review.connect(data), email, role)
            with httpx.Client(base_url=info.url) as browser:
                browser.get("/user/login/")
                browser.post(
                    "/user/login/",
                    data={
                        "email": email,
                        "password": f"pw-{email}-0123",
                        "csrfmiddlewaretoken": browser.cookies["csrftoken"],
                    },
                    headers={"Referer": f"{info.url}/user/login/"},
                )
                own = browser.get("/api/current-user/token").json()["token"]
            made[email] = (added.person.id, LabelStudio(base_url=info.url, api_key=own))
        return made[email]

    return make
