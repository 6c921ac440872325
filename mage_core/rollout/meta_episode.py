"""One meta-episode: K episodes against one opponent or task (docs/method.md section 1).

Schedule: play(1), reflect, play(2), reflect, ..., play(K). The object is a
small state machine driven from outside: ``request()`` says what the policy
must decide next (a prompt, plus the legal actions in constrained mode) and
``apply()`` feeds the decision back. That lets a runner batch the turns of
many meta-episodes into one model call (``mage_core.rollout.runner``).

Every policy decision is recorded as a ``Decision`` with what the returns and
advantages need (docs/method.md sections 3-5): episode index, phase, anchor state,
task reward, penalties, validity and tokens.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Literal

from mage_core.envs.base import Env, FiniteSplit, Outcome, is_revealing
from mage_core.envs.rewards import invalid_action_penalty, length_penalty
from mage_core.rollout.retrieval import MemoryBank
from mage_core.rollout.context import (
    ContextState,
    EpisodeMemory,
    Memory,
    Style,
    paper_trajectory,
    play_prompt,
    reflect_prompt,
)

Phase = Literal["play", "reflect"]
_REMARK = re.compile(r"<remark>(.*?)</remark>", re.IGNORECASE | re.DOTALL)
#: The anchor text of every reflect sample (docs/method.md section 5).
REFLECTION_ANCHOR = "reflection"


@dataclass(frozen=True)
class MetaEpisodeSpec:
    """Who plays what: the draw of one meta-episode."""

    game: str
    opponent: str | None  # None for single-agent tasks
    agent_seat: int
    task_seed: int  # seeds the env: deals, levels, the opponent's randomness
    group: int  # index of the group of meta-episodes that share a baseline
    #: An evaluation set's task of a finite split (``FiniteSplit.reset_to``: each played
    #: once); None: the env draws its task from ``task_seed``.
    task_index: int | None = None


@dataclass(frozen=True)
class MetaSettings:
    num_episodes: int
    reflect: bool  # reflect turns between episodes (False: single-episode baselines)
    restart: Literal["same", "fresh"]
    early_stop: bool
    style: Style
    memory: Memory
    reflections: Literal["summary", "generated"]
    action_mode: Literal["constrained", "free"]
    max_remark_chars: int
    moves_per_turn: int
    invalid_penalty: float
    length_penalty_coef: float
    max_response_tokens: int
    #: A retrieval memory shown instead of the fixed memory lines (the A-MEM and
    #: Memento baselines, ``mage_core.rollout.retrieval``); the bank is attached
    #: to the meta-episodes by the rollout (``MetaEpisode.bank``).
    retrieval: Literal["none", "notes", "cases"] = "none"
    #: After which episodes a reflection is written: every one, or only failed
    #: ones (Reflexion: a verbal reflection on a failed attempt).
    reflect_on: Literal["every", "failure"] = "every"


@dataclass
class Request:
    """One decision to make: a prompt, and the candidates in constrained mode."""

    phase: Phase
    prompt: str
    prompt_ids: list[int]
    candidate_texts: list[str] | None = None
    candidate_ids: list[list[int]] | None = None


@dataclass
class Response:
    """The policy's answer: ``text`` (free: decoded; constrained: the chosen
    candidate), its tokens or choice index, and its log-probability."""

    text: str
    logprob: float
    token_ids: list[int] | None = None
    choice: int | None = None
    token_logprobs: list[float] | None = None  # free mode: each token's, at temperature 1


@dataclass
class Decision:
    phase: Phase
    episode: int  # 0-based episode index; a reflect turn belongs to the episode after it
    turn: int
    anchor: str  # observation without history (GiGPO anchor state)
    prompt_ids: list[int]
    response_ids: list[int] | None
    candidate_ids: list[list[int]] | None
    choice: int | None
    logprob: float
    task_reward: float
    invalid: bool
    penalty: float
    text: str
    token_logprobs: list[float] | None = None  # free mode: the response's per-token log-probs

    def old_logprobs(self) -> list[float]:
        """The log-probabilities PPO's ratio compares against, as the rollout
        sampled them (temperature 1): the choice's, or each response token's."""
        if self.candidate_ids is not None:
            return [self.logprob]
        if self.token_logprobs is None:
            raise ValueError("this free-mode decision kept no per-token log-probs (train.old_logprobs: "
                             "rollout needs them); set train.old_logprobs: recompute")
        return list(self.token_logprobs)


@dataclass
class EpisodeResult:
    reward: float  # R_k: sum of the episode's task rewards
    outcome: Outcome
    num_turns: int
    num_invalid: int


@dataclass
class MetaEpisode:
    spec: MetaEpisodeSpec
    env: Env
    settings: MetaSettings
    encode: Callable[[str], list[int]]  # text -> prompt token ids (with BOS)
    encode_action: Callable[[str], list[int]]  # candidate text -> token ids
    decisions: list[Decision] = field(default_factory=list)
    episodes: list[EpisodeResult] = field(default_factory=list)
    done: bool = False
    bank: MemoryBank | None = None  # the retrieval memory (settings.retrieval), shared by a rollout's meta-episodes

    def __post_init__(self) -> None:
        seat = self.spec.agent_seat if self.spec.opponent is not None else None
        # Without memory every episode is an independent attempt and must read
        # exactly like a lone first episode (how single-episode baselines are
        # trained), so the context never counts earlier episodes.
        shown = 1 if self.settings.memory == "none" else self.settings.num_episodes
        self.context = ContextState(self.spec.game, seat, shown)
        self._phase: Phase = "play"
        self._turn = 0
        self._episode_rewards: list[float] = []
        self._episode_invalid = 0
        self._case_turns: list[tuple[str, str]] = []  # Memento: this episode's (state, action)
        if self.spec.task_index is not None and isinstance(self.env, FiniteSplit):
            self.env.reset_to(self.spec.task_index)
        else:
            self.env.reset()

    # -- what the policy must decide ---------------------------------------------------------

    def request(self) -> Request:
        if self.done:
            raise RuntimeError("the meta-episode is over")
        s = self.settings
        if self._phase == "reflect":
            prompt = reflect_prompt(self.context, self.context.memory[-1])
            return Request("reflect", prompt, self.encode(prompt))
        observation = self.env.compact_observation() if s.style == "compact" else self.env.observation()
        recalled = None
        if s.retrieval != "none":
            if self.bank is None:
                raise RuntimeError(f"retrieval {s.retrieval!r}: no memory bank attached to the meta-episode")
            recalled = self.bank.recall(observation)
        prompt = play_prompt(self.context, observation, s.memory, s.style, s.moves_per_turn, recalled)
        request = Request("play", prompt, self.encode(prompt))
        if s.action_mode == "constrained":
            legal = self.env.legal_actions()
            texts = ([self.env.compact_action(a) for a in legal] if s.style == "compact"
                     else [f"<action>{a}</action>" for a in legal])
            request.candidate_texts = legal
            request.candidate_ids = [self.encode_action(t) for t in texts]
        return request

    def apply(self, request: Request, response: Response) -> None:
        if request.phase == "reflect":
            self._apply_reflection(request, response)
        else:
            self._apply_play(request, response)

    # -- play and reflect turns --------------------------------------------------------------

    def _apply_play(self, request: Request, response: Response) -> None:
        s = self.settings
        anchor = self.env.observation()
        shown = self.env.compact_observation() if s.style == "compact" else anchor
        if request.candidate_texts is not None:
            assert response.choice is not None
            action: str | None = request.candidate_texts[response.choice]
        else:
            action = self.env.parse_action(response.text)
        if s.retrieval == "cases":  # the action as the style shows it, read before the step changes the page
            shown_action = action if action is None or s.style == "paper" else self.env.compact_action(action)
            self._case_turns.append((shown, shown_action or "(invalid)"))
        result = self.env.step(action)
        self._record("play", request, response, anchor, result.reward, result.invalid)
        self._episode_rewards.append(result.reward)
        self._episode_invalid += int(result.invalid)
        self.context.current_turns.append((shown, action if action is not None else "(invalid)"))
        self._turn += 1
        if result.done:
            assert result.outcome is not None
            self._finish_episode(result.outcome)

    def _apply_reflection(self, request: Request, response: Response) -> None:
        matches = _REMARK.findall(response.text)
        remark = matches[-1].strip()[: self.settings.max_remark_chars] if matches else None
        self.context.memory[-1].remark = remark if remark is not None else ""
        if self.settings.retrieval == "notes" and self.bank is not None:
            self.bank.add_note(remark or "")
        self._record("reflect", request, response, REFLECTION_ANCHOR, 0.0, remark is None)
        self._next_episode()

    def _record(self, phase: Phase, request: Request, response: Response, anchor: str, reward: float,
                invalid: bool) -> None:
        s = self.settings
        num_tokens = len(response.token_ids) if response.token_ids is not None else 0
        penalty = invalid_action_penalty(invalid, s.invalid_penalty) + length_penalty(
            num_tokens, s.max_response_tokens, s.length_penalty_coef)
        # A play turn belongs to the episode in progress; a reflect turn, taken
        # after episode k ended, to episode k+1: both are len(self.episodes).
        episode = len(self.episodes)
        self.decisions.append(Decision(
            phase=phase, episode=episode, turn=self._turn if phase == "play" else -1, anchor=anchor,
            prompt_ids=request.prompt_ids, response_ids=response.token_ids,
            candidate_ids=request.candidate_ids, choice=response.choice, logprob=response.logprob,
            task_reward=reward, invalid=invalid, penalty=penalty, text=response.text,
            token_logprobs=response.token_logprobs,
        ))

    def _finish_episode(self, outcome: Outcome) -> None:
        s = self.settings
        self.episodes.append(EpisodeResult(sum(self._episode_rewards), outcome, self._turn, self._episode_invalid))
        success = outcome is Outcome.WIN
        final = self.env.compact_observation() if s.style == "compact" else self.env.observation()
        trajectory = final if s.style == "compact" else paper_trajectory(self.context.current_turns, final)
        # A structured summary stands in for a generated reflection (small models,
        # docs/architecture.md, "The embedded default"): the episode's final state and result.
        reflects = s.reflect_on == "every" or not success
        summary = final if s.reflections == "summary" and reflects else None
        if s.memory != "none":
            facts = self.env.revealed() if is_revealing(self.env) else None
            line = None
            if facts is not None and facts.facts:
                line = self.env.memory_line(facts, s.style)
            self.context.memory.append(EpisodeMemory(trajectory, success, summary, facts, line))
        if self.bank is not None and s.retrieval == "cases":
            self.bank.add_cases(self._case_turns, "success" if success else "failure")
        elif self.bank is not None and s.retrieval == "notes" and summary is not None:
            self.bank.add_note(summary)
        last = len(self.episodes) == s.num_episodes
        if last or (s.early_stop and success):
            self.done = True
        elif s.reflect and s.reflections == "generated" and reflects:
            self._phase = "reflect"
        else:
            self._next_episode()

    def _next_episode(self) -> None:
        if self.settings.restart == "same":
            self.env.restart()
        else:
            self.env.reset()
        self.context.current_turns = []
        self._case_turns = []
        self._episode_rewards = []
        self._episode_invalid = 0
        self._turn = 0
        self._phase = "play"
