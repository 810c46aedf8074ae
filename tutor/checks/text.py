"""Grade free-text answers against a rubric of concepts and misconceptions.

How an answer is read (the same steps apply to every rubric phrase, so both sides agree):

1. Normalise: Unicode NFKC, lower case, curly quotes and dashes made plain, control and
   zero-width characters dropped, contractions expanded ("doesn't" -> "does not",
   also the apostrophe-less "doesnt"), answers cut to the spec's `max_length`.
2. Tokenise: words (letters and digits: "float16", "fp16"), numbers ("6e-8", "0.5"),
   and breaks. Code is split at its punctuation: "inputs.to(device)" -> input, to, devic;
   "zero_grad" -> zero, grad. Sentence breaks (". ", "!", "?", ";", newline) and clause
   breaks (", ", ": ", " - ", "but", "because", "and", ...) are remembered.
3. Stem lightly: plurals and -s/-ing/-ed/-e endings ("underflows", "underflowing",
   "underflowed" -> "underflow"; "gradients" -> "gradient"; "moving", "moves" -> "mov").

How a phrase matches:

- Prose ("small gradients underflow"): all its content words (small words such as "the",
  "to", "is" are ignored) occur within a window of len(words) + 3 content words, in any
  order, inside one sentence. Words of 6+ letters also match with one typo ("forwrad").
  A word ending in `*` matches any word it begins ("automat*" matches "automatically").
- Code (the phrase contains one of `( ) . _ : = [ ]`, e.g. "model(inputs)", "to(device)"):
  its tokens occur contiguously and in order, so "to(device)" matches "inputs.to(device)"
  and "x = x.to(device)" but not "moved it to the device".
- `re:PATTERN`: a regex searched in the normalised text (lower case, contractions
  expanded, punctuation kept). An invalid regex never matches (`lint_rubric` reports it).

Negation: a match is discarded when
- a negator ("not", "no", "never", "without", "nor", "neither", "none", "nothing",
  "rather than", "instead of"; but not "not only", "not just", "no matter") stands inside
  the matched span, or among the 3 content words before it in the same clause; or
- the same clause goes on to dismiss it: "more epochs will not help", "... is a myth".
So "the GPU is not always faster" does not trigger "GPU always faster", and "it does not
underflow" does not count as the concept "underflow". "Not enough" (and "too little") reads
as "too few": "not enough cores" says something about cores, so it matches "core*" and
"too few cores"; it is not a negation. `explain_negations` says which phrase a negation
removed and which words did it (lint and `lesson test` quote it). This applies to concepts and
misconceptions alike. A phrase may contain a negator itself ("not in place"), and then
matches only negated statements; in a regex, a negator counts as part of the phrase only
when the pattern spells it ("re:\\bno error").

Verdict: correct iff no misconception matched and all required concepts matched (or at
least `min_concepts`). The first matched misconception (in rubric order) gives its own
feedback; otherwise the first two missing concepts give their `missing` text. A correct
answer that lacks a required or `bonus` concept is told about one ("To go further: ...").
`score` is the share of required and bonus concepts met. Blank answers, and answers of a
word or two that meet nothing, are asked for a sentence or two.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

from tutor.checks.answers import Concept, Rubric, TextAnswer, Verdict

# ----------------------------------------------------------------------------- normalise

_TRANSLATE = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u2032": "'",
        "`": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u201f": '"',
        "\u2033": '"',
        "\u00ab": '"',
        "\u00bb": '"',
        "\u2010": "-",
        "\u2011": "-",
        "\u2012": "-",
        "\u2013": "-",
        "\u2014": "-",
        "\u2015": "-",
        "\u2212": "-",
        "\u00d7": " x ",
        "\u2192": " -> ",
    }
)

# "n't" forms, with and without the apostrophe (learners type "doesnt")
_IRREGULAR_NT = {
    "won't": "will not",
    "can't": "can not",
    "shan't": "shall not",
    "ain't": "is not",
    "wont": "will not",
    "cant": "can not",
    "aint": "is not",
    "cannot": "can not",
}
_NT_WORDS = (
    "don",
    "doesn",
    "didn",
    "isn",
    "wasn",
    "aren",
    "weren",
    "hasn",
    "haven",
    "hadn",
    "shouldn",
    "wouldn",
    "couldn",
    "mustn",
    "needn",
)
_NT_RE = re.compile(r"\b(" + "|".join(_NT_WORDS) + r")'?t\b")
_IRREGULAR_RE = re.compile(r"\b(" + "|".join(re.escape(k) for k in _IRREGULAR_NT) + r")(?![\w'])")
_CLITIC_RE = re.compile(r"(?<=[^\W\d_])'(s|re|ll|ve|d|m)\b")
_SPACE_RE = re.compile(r"[ \t\r\f\v]+")


def normalise(text: str, max_length: int | None = None) -> str:
    """Lower-cased, plain-punctuation, contraction-expanded text (regex phrases run on this)."""
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    if max_length is not None and max_length >= 0:
        text = text[:max_length]
    text = unicodedata.normalize("NFKC", text).translate(_TRANSLATE)
    if max_length is not None and max_length >= 0:
        text = text[: max_length * 2]  # NFKC can expand a few characters; keep work bounded
    out = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch == "\n":
            out.append("\n")
        elif cat in ("Cc", "Zl", "Zp"):
            out.append(" ")
        elif cat in ("Cf", "Cs", "Co", "Cn"):
            continue
        else:
            out.append(ch)
    text = "".join(out).lower()
    text = _IRREGULAR_RE.sub(lambda m: _IRREGULAR_NT[m.group(1)], text)
    text = _NT_RE.sub(lambda m: m.group(1)[:-1] + " not", text)
    text = _CLITIC_RE.sub(
        lambda m: {"s": "", "re": " are", "ll": " will", "ve": " have", "d": " would", "m": " am"}[m.group(1)], text
    )
    text = text.replace("w/o", "without ").replace("b/c", "because ")
    # "not enough cores" says there are too few cores; it does not deny cores (a negator would).
    text = _SHORTFALL_RE.sub("too few", text)
    return _SPACE_RE.sub(" ", text).strip()


_SHORTFALL_RE = re.compile(r"\b(?:not\s+enough|too\s+little)\b")


# ----------------------------------------------------------------------------- stemming

_IRREGULAR_STEMS = {
    "using": "use",
    "used": "use",
    "uses": "use",
    "use": "use",
    "does": "do",
    "did": "do",
    "doing": "do",
    "done": "do",
    "has": "have",
    "had": "have",
    "having": "have",
    "is": "be",
    "are": "be",
    "was": "be",
    "were": "be",
    "been": "be",
    "being": "be",
    "gave": "give",
    "given": "give",
    "gives": "give",
    "giving": "give",
    "made": "make",
    "makes": "make",
    "making": "make",
    "ran": "run",
    "runs": "run",
    "running": "run",
    "threw": "throw",
    "thrown": "throw",
    "throws": "throw",
    "throwing": "throw",
    "went": "go",
    "goes": "go",
    "gone": "go",
    "going": "go",
    "got": "get",
    "gotten": "get",
    "gets": "get",
    "getting": "get",
    "data": "data",
    "gpus": "gpu",
    "cpus": "cpu",
    "faster": "faster",
    "slower": "slower",
}
_VOWEL_RE = re.compile(r"[aeiouy]")


def stem(word: str) -> str:
    """A light, consistent stemmer: plurals, 3rd person -s, -ing, -ed, final -e."""
    if word in _IRREGULAR_STEMS:
        return _IRREGULAR_STEMS[word]
    if len(word) <= 3 or not word.isalpha():
        return word
    w = word
    if (w.endswith("ies") and len(w) > 4) or (w.endswith("ied") and len(w) > 4):
        w = w[:-3] + "y"
    elif w.endswith("sses") or w.endswith(("ches", "shes", "xes", "zes")):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    for suffix in ("ing", "ed"):
        if w.endswith(suffix) and not w.endswith("eed"):
            base = w[: -len(suffix)]
            if len(base) >= 2 and _VOWEL_RE.search(base):
                w = base
                if len(w) >= 3 and w[-1] == w[-2] and w[-1] not in "lsz" and w[-1].isalpha():
                    w = w[:-1]  # running -> runn -> run
            break
    if len(w) >= 4 and w.endswith("e") and not w.endswith("ee"):
        w = w[:-1]
    return w


# ----------------------------------------------------------------------------- tokens

NEGATORS = frozenset({"not", "no", "never", "without", "nor", "neither", "none", "nothing"})
# A statement dismissed by what follows it in the same clause: "more epochs will not help",
# "the idea that the GPU is always faster is a myth".
_DISMISS_WORDS = frozenset(
    {"irrelevant", "myth", "misconception", "wrong", "false", "untrue", "nonsense", "unrelated", "pointless", "useless"}
)
_DISMISS_AFTER_NEG_WORDS = (
    "help",
    "matter",
    "fix",
    "solve",
    "change",
    "improve",
    "work",
    "true",
    "issue",
    "problem",
    "cause",
    "reason",
    "relevant",
    "right",
    "correct",
    "affect",
    "speed",
    "make",
)
DISMISS_REACH = 6  # tokens after a match that a dismissal may stand in
_NEGATION_EXCEPTIONS = frozenset({"only", "just", "merely", "simply", "matter"})  # "not only", "no matter"
_CLAUSE_WORDS = frozenset(
    {
        "but",
        "because",
        "since",
        "although",
        "though",
        "however",
        "whereas",
        "while",
        "and",
        "so",
        "instead",
        "therefore",
        "thus",
        "hence",
        "which",
    }
)
STOPWORDS = frozenset(
    {
        "a",
        "an",
        "the",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "of",
        "to",
        "for",
        "on",
        "at",
        "by",
        "there",
        "their",
        "they",
        "them",
        "you",
        "your",
        "i",
        "we",
        "my",
        "our",
        "me",
        "he",
        "she",
        "his",
        "her",
        "do",
        "does",
        "did",
        "will",
        "would",
        "can",
        "could",
        "should",
        "shall",
        "has",
        "have",
        "had",
        "am",
        "then",
        "than",
        "also",
        "which",
        "who",
        "what",
        "as",
        "if",
        "so",
        "and",
        "or",
        "s",
        "get",
        "gets",
        "got",
        "onto",
        "from",
    }
)
# Stop words whose stems must also be skipped (stem("does") == "do", etc.)
_STOP_STEMS = frozenset(stem(w) for w in STOPWORDS) | STOPWORDS
_DISMISS_AFTER_NEG = frozenset(stem(w) for w in _DISMISS_AFTER_NEG_WORDS)

_TOKEN_RE = re.compile(
    r"(?P<num>[0-9]+(?:\.[0-9]+)?(?:e[-+]?[0-9]+)?)"
    r"|(?P<word>[^\W\d_][^\W_]*)"
    r"|(?P<clause>\.\.+|[,:](?=\s|$)|\s-+\s|\s->\s|\s\()"  # "..." pauses, it does not end a sentence
    r"|(?P<sent>[.!?;]+(?=\s|$)|\n)",
)


@dataclass(frozen=True)
class Token:
    stem: str
    raw: str
    start: int  # char offsets in the normalised text
    end: int
    sent: int
    clause: int

    @property
    def content(self) -> bool:
        return self.stem not in _STOP_STEMS and self.raw not in STOPWORDS


def tokenise(norm: str) -> list[Token]:
    """Tokens of already-normalised text, with sentence and clause indexes."""
    tokens: list[Token] = []
    sent = clause = 0
    for m in _TOKEN_RE.finditer(norm):
        kind = m.lastgroup
        if kind == "sent":
            sent += 1
            clause += 1
            continue
        if kind == "clause":
            clause += 1
            continue
        raw = m.group(0)
        if kind == "word" and raw in _CLAUSE_WORDS:
            clause += 1
        tokens.append(Token(stem(raw) if kind == "word" else raw, raw, m.start(), m.end(), sent, clause))
    return tokens


# ----------------------------------------------------------------------------- phrases

WINDOW_SLACK = 3  # extra content words allowed between a prose phrase's words
NEGATION_REACH = 3  # content words before a match that a negator may stand in
_CODE_CHARS = set("()._:=[]")


@dataclass(frozen=True)
class Phrase:
    source: str
    regex: re.Pattern[str] | None = None
    words: tuple[tuple[str, bool], ...] = ()  # (stem or prefix, is_prefix)
    code: bool = False
    valid: bool = True
    literal_words: frozenset[str] = frozenset()  # regex: words written in the pattern itself


@lru_cache(maxsize=4096)
def compile_phrase(source: str) -> Phrase:
    if source.startswith("re:"):
        try:
            literal = frozenset(re.findall(r"[a-z]+", re.sub(r"\\[a-zA-Z]", " ", source[3:]).lower()))
            return Phrase(source, regex=re.compile(source[3:], re.IGNORECASE), literal_words=literal)
        except (re.error, RecursionError, OverflowError, ValueError):
            return Phrase(source, valid=False)
    code = any(c in _CODE_CHARS for c in source)
    words: list[tuple[str, bool]] = []
    for chunk in source.split():
        prefix = chunk.endswith("*")
        for tok in tokenise(normalise(chunk.rstrip("*"))):
            words.append((tok.raw if prefix else tok.stem, prefix))
    if not code:
        content = tuple(w for w in words if w[1] or (w[0] not in _STOP_STEMS))
        if content:
            words = list(content)
    return Phrase(source, words=tuple(words), code=code, valid=bool(words))


def lint_rubric(rubric: Rubric) -> list[str]:
    """Problems in a rubric's phrases that would make it grade badly (for authors and tests)."""
    problems: list[str] = []
    groups = [(c.name, c.any) for c in [*rubric.require, *rubric.bonus]]
    groups += [(m.name, m.any) for m in rubric.misconceptions]
    for name, phrases in groups:
        for source in phrases:
            phrase = compile_phrase(source)
            if not phrase.valid:
                what = "invalid regex" if source.startswith("re:") else "no words"
                problems.append(f"{name}: {source!r}: {what}")
                continue
            if phrase.regex is None and not phrase.code and len(phrase.words) == 1 and len(source.split()) > 1:
                problems.append(
                    f"{name}: {source!r} keeps only the word {phrase.words[0][0]!r} once small words are "
                    "ignored; write that word alone or use a regex"
                )
    needed = rubric.min_concepts
    if needed is not None and needed > len(rubric.require):
        problems.append(f"min_concepts is {needed} but only {len(rubric.require)} concepts are required")
    return problems


FUZZY_MIN_LENGTH = 6  # words this long also match with one typo ("forwrad", "diffrent")


def _one_edit(a: str, b: str) -> bool:
    """True if a and b differ by one insertion, deletion, substitution or adjacent swap."""
    la, lb = len(a), len(b)
    if abs(la - lb) > 1 or a == b:
        return False
    if la == lb:
        diff = [i for i in range(la) if a[i] != b[i]]
        return len(diff) == 1 or (
            len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]]
        )
    if la > lb:
        a, b = b, a
    i = 0
    while i < len(a) and a[i] == b[i]:
        i += 1
    return a[i:] == b[i + 1 :]


def _word_hits(word: tuple[str, bool], tok: Token, fuzzy: bool = False) -> bool:
    text, prefix = word
    if prefix:
        return tok.raw.startswith(text) or tok.stem.startswith(text)
    if tok.stem == text:
        return True
    # typos: only long, purely alphabetic words (never fp16 vs bf16, never not/no)
    return (
        fuzzy and len(text) >= FUZZY_MIN_LENGTH and text.isalpha() and tok.stem.isalpha() and _one_edit(text, tok.stem)
    )


@dataclass(frozen=True)
class Match:
    phrase: str
    start: int  # char offsets in the normalised text
    end: int


class Answer:
    """A normalised, tokenised answer that phrases are matched against."""

    def __init__(self, text: str, max_length: int | None = None):
        self.norm = normalise(text, max_length)
        self.tokens = tokenise(self.norm)
        self.content_idx = [i for i, t in enumerate(self.tokens) if t.content]

    # -- negation
    def _is_negator(self, i: int) -> bool:
        tok = self.tokens[i]
        nxt = self.tokens[i + 1].raw if i + 1 < len(self.tokens) else ""
        if tok.raw in NEGATORS:
            return nxt not in _NEGATION_EXCEPTIONS
        if tok.raw == "rather":
            return nxt == "than"
        if tok.raw == "instead":
            return nxt == "of"
        return False

    _ignore_negation = False  # set while `negated_by` looks for what negation removed

    def negated(self, matched: list[int], own: set[int] | None = None) -> bool:
        """Is the match at these token indexes negated? `own`: tokens that belong to the phrase."""
        return not self._ignore_negation and self.negator(matched, own) is not None

    def negator(self, matched: list[int], own: set[int] | None = None) -> str | None:
        """The words that negate the match at these token indexes ("not", "... will not help",
        "... is a myth"), or None."""
        first, last = min(matched), max(matched)
        own = set(matched) if own is None else own
        # a negator inside the matched span ("the GPU is not always faster")
        for i in range(first, last + 1):
            if i not in own and self._is_negator(i):
                return self._negator_words(i)
        # ... or shortly before it, in the same clause ("no CUDA out of memory error")
        head = self.tokens[first]
        seen = 0
        for i in range(first - 1, -1, -1):
            tok = self.tokens[i]
            if tok.sent != head.sent or tok.clause != head.clause:
                break
            if self._is_negator(i):
                return self._negator_words(i)
            if tok.content:
                seen += 1
                if seen >= NEGATION_REACH:
                    break
        tail = self.tokens[last]
        for i in range(last + 1, min(len(self.tokens), last + 1 + DISMISS_REACH)):
            tok = self.tokens[i]
            if tok.sent != tail.sent or tok.clause != tail.clause:
                break
            if tok.raw in _DISMISS_WORDS:
                return tok.raw
            if tok.raw in NEGATORS:
                after = [t for t in self.tokens[i + 1 : i + 4] if t.sent == tail.sent]
                after = [t for t in after if t.stem not in _STOP_STEMS][:1]
                if after and after[0].stem in _DISMISS_AFTER_NEG:
                    return self.norm[tok.start : after[0].end]
        return None

    def _negator_words(self, i: int) -> str:
        raw = self.tokens[i].raw
        return f"{raw} {self.tokens[i + 1].raw}" if raw in ("rather", "instead") else raw

    def negated_by(self, source: str) -> tuple[Match, str] | None:
        """A match of the phrase that negation removed, and the words that removed it; None
        when the phrase matches as it is, or would not match even without negation."""
        if self.find(source) is not None:
            return None
        self._ignore_negation = True
        try:
            found = self.find(source)
        finally:
            self._ignore_negation = False
        if found is None:
            return None
        idx = [i for i, t in enumerate(self.tokens) if t.start >= found.start and t.end <= found.end]
        return found, (self.negator(idx) if idx else None) or "a negation"

    # -- matching
    def find(self, source: str) -> Match | None:
        """The first non-negated match of a phrase, or None."""
        phrase = compile_phrase(source)
        if not phrase.valid:
            return None
        if phrase.regex is not None:
            return self._find_regex(phrase)
        if phrase.code:
            return self._find_code(phrase)
        return self._find_prose(phrase)

    def _span(self, phrase: Phrase, idx: list[int]) -> Match:
        return Match(phrase.source, self.tokens[min(idx)].start, self.tokens[max(idx)].end)

    def _find_regex(self, phrase: Phrase) -> Match | None:
        assert phrase.regex is not None
        try:
            for m in phrase.regex.finditer(self.norm):
                idx = [i for i, t in enumerate(self.tokens) if t.end > m.start() and t.start < m.end()]
                # a negator inside a regex match belongs to the phrase only if the pattern spells it
                own = {i for i in idx if not self._is_negator(i) or self.tokens[i].raw in phrase.literal_words}
                if not idx or not self.negated(idx, own):
                    return Match(phrase.source, m.start(), m.end())
        except (RecursionError, re.error):
            return None
        return None

    def _find_code(self, phrase: Phrase) -> Match | None:
        n, k = len(self.tokens), len(phrase.words)
        for s in range(n - k + 1):
            if all(_word_hits(phrase.words[j], self.tokens[s + j]) for j in range(k)):
                idx = list(range(s, s + k))
                if not self.negated(idx):
                    return self._span(phrase, idx)
        return None

    def _find_prose(self, phrase: Phrase) -> Match | None:
        words = phrase.words
        window = len(words) + WINDOW_SLACK
        ci = self.content_idx
        for a in range(len(ci)):
            if not any(_word_hits(w, self.tokens[ci[a]], True) for w in words):
                continue
            sent = self.tokens[ci[a]].sent
            chosen: dict[int, int] = {}  # phrase word index -> token index
            for b in range(a, min(len(ci), a + window)):
                tok = self.tokens[ci[b]]
                if tok.sent != sent:
                    break
                for j, w in enumerate(words):
                    if j not in chosen and _word_hits(w, tok, True):
                        chosen[j] = ci[b]
                        break
                if len(chosen) == len(words):
                    break
            if len(chosen) == len(words):
                idx = sorted(chosen.values())
                if not self.negated(idx):
                    return self._span(phrase, idx)
        return None

    def find_any(self, phrases: list[str]) -> Match | None:
        for p in phrases:
            m = self.find(p)
            if m is not None:
                return m
        return None

    @property
    def word_count(self) -> int:
        return sum(1 for t in self.tokens if t.stem.isalpha() or t.raw[:1].isdigit())


# ----------------------------------------------------------------------------- grading

BLANK_FEEDBACK = "Write a sentence or two in your own words: what happens, and why?"
SHORT_FEEDBACK = "Write a sentence or two in your own words: a word or two is not enough to grade."


def grade_text(answer: str, spec: TextAnswer) -> Verdict:
    text = answer if isinstance(answer, str) else ""
    parsed = Answer(text, spec.max_length)
    if not parsed.tokens or parsed.word_count == 0:
        return Verdict(
            False, BLANK_FEEDBACK, missing=[c.name for c in (spec.rubric.require if spec.rubric else [])], judged=False
        )
    rubric = spec.rubric
    if rubric is None:
        return Verdict(True, "Saved. This answer is not graded: compare it with the result.", score=1.0)
    return grade_rubric(parsed, rubric)


def grade_rubric(parsed: Answer, rubric: Rubric) -> Verdict:
    met = [c for c in rubric.require if parsed.find_any(c.any) is not None]
    missing = [c for c in rubric.require if c not in met]
    bonus_met = [c for c in rubric.bonus if parsed.find_any(c.any) is not None]
    bonus_missing = [c for c in rubric.bonus if c not in bonus_met]
    total = len(rubric.require) + len(rubric.bonus)
    score = (len(met) + len(bonus_met)) / total if total else 1.0
    needed = (
        len(rubric.require) if rubric.min_concepts is None else min(max(rubric.min_concepts, 0), len(rubric.require))
    )
    names_missing = [c.name for c in missing]

    for mc in rubric.misconceptions:
        if parsed.find_any(mc.any) is not None:
            return Verdict(False, mc.feedback, missing=names_missing, matched_misconception=mc.name, score=score)

    if len(met) >= needed:
        further = (missing + bonus_missing)[:1]
        if not further:
            return Verdict(True, "Right: that covers it.", score=score)
        return Verdict(True, f"Right. To go further: {_missing_text(further)}", missing=names_missing, score=score)

    if parsed.word_count < 3 and not met:
        hint = _missing_text(missing[:1]) if missing else ""
        return Verdict(False, f"{SHORT_FEEDBACK} {hint}".strip(), missing=names_missing, score=score)
    return Verdict(False, _missing_text(missing[:2]), missing=names_missing, score=score)


def _missing_text(concepts: list[Concept]) -> str:
    parts = []
    for c in concepts:
        text = c.missing.strip() or f"Your answer does not yet mention {c.name.replace('-', ' ')}."
        parts.append(text)
    return " ".join(parts)


def explain_negations(answer: str, rubric: Rubric, names: list[str], max_length: int | None = None) -> list[str]:
    """For each named concept the answer lacks only because of a negation: which phrase matched
    which words, and the words that negated them (for lesson authors: lint, lesson test)."""
    parsed = Answer(answer, max_length)
    out = []
    for concept in [*rubric.require, *rubric.bonus]:
        if concept.name not in names:
            continue
        for source in concept.any:
            found = parsed.negated_by(source)
            if found is not None:
                match, words = found
                out.append(
                    f"concept {concept.name!r}: {source!r} matched "
                    f"{parsed.norm[match.start : match.end]!r}, but {words!r} negates it there"
                )
                break
    return out


def explain_matches(answer: str, rubric: Rubric, max_length: int | None = None) -> dict[str, str | None]:
    """Which phrase matched each concept / misconception (for lesson authors and tests)."""
    parsed = Answer(answer, max_length)
    out: dict[str, str | None] = {}
    for c in [*rubric.require, *rubric.bonus]:
        m = parsed.find_any(c.any)
        out[c.name] = m.phrase if m else None
    for mc in rubric.misconceptions:
        m = parsed.find_any(mc.any)
        out["!" + mc.name] = m.phrase if m else None
    return out
