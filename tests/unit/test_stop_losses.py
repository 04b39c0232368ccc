"""What a distributed run's stop could not save, in amounts and words
(``deploy/ray/failures.py``): a pure function of the learner's final report and the run's
losses so far, which it reads and never changes."""

from __future__ import annotations

from zeroforge.deploy.ray.failures import stop_problems


def test_a_clean_stop_lost_nothing():
    assert stop_problems({"unacked": 0}, {}, "", False, [], 60) == ({}, [])


def test_each_loss_is_an_amount_and_a_sentence_and_the_run_s_losses_stay_as_they_were():
    lost = {"crashed_while_stopping": 1.0}
    amounts, words = stop_problems({"unacked": 3, "unpublished_steps": 12}, lost,
                                   "OOM in step", True, ["selfplay 2"], 45)
    assert lost == {"crashed_while_stopping": 1.0}  # read, not written
    assert amounts == {"unacked": 3.0, "unpublished_steps": 12.0, "undrained": 1.0}
    assert len(words) == 5
    assert "crashed while stopping (OOM in step)" in words[0]
    assert "12 learner steps are in the checkpoint but not in Redis" in words[1]
    assert "3 stream entries were not acknowledged" in words[2]
    assert "no learner ran at the stop" in words[3]
    assert words[4] == "selfplay 2 did not finish within 45 s (no final checkpoint from them)"


def test_a_failed_final_checkpoint_says_the_unacked_entries_are_not_in_it():
    amounts, [words] = stop_problems({"unacked": 4, "checkpoint_error": "disk full"}, {},
                                     "", False, [], 60)
    assert amounts == {"unacked": 4.0, "final_checkpoint": 1.0}
    assert "(disk full)" in words and "4 stream entries received since" in words
    assert "in the checkpoint" not in words.replace("final checkpoint", "")
