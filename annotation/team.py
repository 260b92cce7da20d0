"""The people of a review: `curate ls user add EMAIL [--role annotator|adjudicator]`, `curate ls user list`.

Label Studio's user API makes accounts without a usable password (they cannot log in until someone runs
`label-studio reset_password`), so a person is added the way Label Studio's own invitation does it: the
organization's invite link (`/api/invite`, admin token) and the signup form behind it, with a password from
CURATE_REVIEWER_PASSWORD or one generated and printed once. The open edition has no roles: ours is kept in the
user's last name (`annotator` or `adjudicator`), where Label Studio shows it beside the name, and the pull reads
it from there (only adjudicators settle ties, never on a sample they reviewed).
"""

from __future__ import annotations

import os
import re
import secrets
from dataclasses import dataclass
from html import unescape
from typing import Literal

from benchcurate.annotation.review import ADJUDICATOR, Connection, talking_to
from benchcurate.curation.core.errors import UserError

Role = Literal["annotator", "adjudicator"]
PASSWORD_ENV = "CURATE_REVIEWER_PASSWORD"
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+$")


@dataclass(frozen=True)
class Person:
    id: int
    email: str
    role: str  # annotator, adjudicator, or "-" (no role: e.g. the admin)


@dataclass(frozen=True)
class Added:
    person: Person
    password: str | None  # the generated password, to print once; None when taken from the environment or kept
    created: bool


def add_user(connection: Connection, email: str, role: Role) -> Added:
    """Create a person who can log in (or give an existing one `role`)."""
    if not EMAIL.match(email):
        raise UserError(f"{email!r} is not an email address; Label Studio logs people in by email")
    with talking_to(connection, "adding a user"):
        client = connection.client()
        user = _find(client, email)
        given = os.environ.get(PASSWORD_ENV)
        password = given or secrets.token_urlsafe(12)
        created = user is None
        if created:
            _sign_up(connection, email, password)
            user = _find(client, email)
            if user is None:
                raise UserError(f"Label Studio did not create {email}; look at its log (`curate ls status`)")
        client.users.update(user.id, first_name=user.first_name or email.split("@")[0], last_name=role)
    return Added(Person(user.id, email.lower(), role), password if created and not given else None, created)


def _find(client, email: str):
    return next((user for user in client.users.list() if (user.email or "").lower() == email.lower()), None)


def _sign_up(connection: Connection, email: str, password: str) -> None:
    """Label Studio's signup form behind the organization's invite link (signup without it is closed)."""
    import httpx

    invite = httpx.get(
        f"{connection.url}/api/invite", headers={"Authorization": f"Token {connection.token}"}, timeout=30
    )
    invite.raise_for_status()
    link = f"{connection.url}{invite.json()['invite_url']}"
    with httpx.Client(timeout=30, follow_redirects=False) as browser:
        browser.get(link).raise_for_status()
        reply = browser.post(
            link,
            data={"email": email, "password": password, "csrfmiddlewaretoken": browser.cookies.get("csrftoken", "")},
            headers={"Referer": link},
        )
    if reply.status_code == 302:
        return
    reply.raise_for_status()
    errors = [
        unescape(text).strip()
        for block in re.findall(r'class="field_errors">(.*?)</ul>', reply.text, re.S)
        for text in re.findall(r"<li>(.*?)</li>", block, re.S)
    ]
    raise UserError(
        f"Label Studio refused to create {email}: {'; '.join(errors) or 'the signup form came back'}"
        + (f" (the password comes from {PASSWORD_ENV})" if os.environ.get(PASSWORD_ENV) else "")
    )


def list_users(connection: Connection) -> list[Person]:
    with talking_to(connection, "listing users"):
        users = list(connection.client().users.list())
    return [
        Person(user.id, user.email, user.last_name if user.last_name in ("annotator", ADJUDICATOR) else "-")
        for user in sorted(users, key=lambda user: user.id)
    ]
