"""What conversation_generate checks on what comes back: length, alternation, naming the entity."""

from benchcurate.curation.generation.conversation import ConversationConfig, check
from benchcurate.schemas import Categories, Drop, Keep, Turn
from tests.factories import make_sample


def conversation(*utterances, sub="Eiffel Tower"):
    turns = [
        Turn(speaker="user" if index % 2 == 0 else "assistant", utterance=text) for index, text in enumerate(utterances)
    ]
    return make_sample(
        1, conversation=turns, categories=Categories(image_main="Architecture and Landmarks", image_sub=sub)
    )


GOOD = ("How tall is it?", "About 330 m.", "When was it built?", "1889.", "Plan a visit there.", "Sure: ...")


def test_a_well_formed_conversation_is_kept():
    assert check(conversation(*GOOD), ConversationConfig()) == Keep()


def test_naming_the_entity_in_a_user_turn_is_a_recorded_drop():
    named = conversation("How tall is the eiffel  tower?", *GOOD[1:])
    verdict = check(named, ConversationConfig())
    assert isinstance(verdict, Drop) and verdict.reason == "names_the_entity"
    assert verdict.detail == {"entity": "Eiffel Tower", "utterances": [0]}
    assert check(named, ConversationConfig(forbid_entity_name=False)) == Keep()
    in_answer = conversation(GOOD[0], "The Eiffel Tower is 330 m.", *GOOD[2:])
    assert check(in_answer, ConversationConfig()) == Keep()  # only the user must not name it
    assert check(conversation("Is it a tower-like thing?", *GOOD[1:]), ConversationConfig()) == Keep()


def test_short_and_non_alternating_conversations_are_dropped_with_their_reason():
    assert check(conversation(*GOOD[:4]), ConversationConfig()).reason == "conversation_too_short"
    swapped = conversation(*GOOD)
    swapped = swapped.model_copy(
        update={"conversation": [swapped.conversation[1], *swapped.conversation[:1], *swapped.conversation[2:]]}
    )
    assert check(swapped, ConversationConfig()).reason == "conversation_malformed"
