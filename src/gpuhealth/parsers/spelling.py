"""Spelling tolerance for a person's words: "unknow runtime specified", "nvidia-smi has faild".

People retype an error or tell what they saw, and a typo makes the line match nothing the readers know. ``corrected``
maps each out-of-vocabulary word of at least 5 letters to the one vocabulary word within Damerau-Levenshtein distance
1 (an insertion, a deletion, a substitution or a swap of two neighbouring letters), and leaves it alone when there is
none or more than one. The vocabulary is the words the readers already know, taken from their own tables when first
needed: the signature catalogue's patterns, example lines and summaries, the symptom- and cause-phrase families'
patterns and examples (so a told cause's words, "compiled", "headers", "blacklisted", "enrolled", are known), and the
literals of the prose fact readers' patterns (parsers/prose.py). Words of common English (the NLTK stop-word list, and
any word those tables use, with its plural or past form) are never "corrected".

Distance 2 is not tried, not even for long words: measured over the words of this project's own documentation
(2026-12-07), a unique known word 2 edits away "corrected" 33 real English words of 8 letters or more that the small
vocabulary lacks ("difference" -> "different", "headless" -> "headers", "presence" -> "present", "listening" ->
"listing"), and kept ambiguous the typo it was meant for ("compilated": "compiled" and "completed" are 2 edits away).

Only words made of letters are looked at: numbers, versions, paths, hex, identifiers with digits or underscores and
mixed-case names (``cudaMalloc``) are left as typed. Analyze applies it to a person's words only, and only to a line
that matched nothing as typed (analyze.py ``_read_misspelt``); what it reads from the corrected line is reported.
Cost: one pass over the line; each word looks up its single-letter deletions (at most ``_MAX_WORD`` of them) in an
index of the vocabulary's deletions.
"""

from __future__ import annotations

import functools

from gpuhealth.lazyre import lazy_re

__all__ = ["corrected", "vocabulary"]

_MIN_WORD = 5  # shorter words are too often 1 edit from several real ones ("ecc", "gpu", "bus")
_MAX_WORD = 30
_MAX_LINE = 4_000  # a longer line is no sentence a person typed: left as it is

# the NLTK English stop-word list's words of 5 letters or more (nltk_data corpora/stopwords/english): common English
# that a table may not happen to use, and that is 1 edit from a word it does ("there"/"these", "where"/"here")
_ENGLISH = frozenset((
    "about above after again against because before being below between could doing during further having "
    "herself himself itself myself other ought ourselves should their theirs themselves there these those "
    "through under until where which while whom would yourself yourselves yours hadn hasn haven isn mightn "
    "mustn needn shan shouldn wasn weren won wouldn couldn didn doesn aren").split())

_CHUNK = lazy_re(r"\S+")  # a run without spaces: a word, a path, a version, an identifier
_TEXT_WORD = lazy_re(r"[A-Za-z]{3,}")
_NOT_WORDS = lazy_re(r"[\d_/\\@=<>{}$%#|~`]")  # a chunk holding one is a number, path, identifier or markup
_EDGE = "\"'()[],;:!?.*"
# in a pattern's source: named groups, inline flags and escapes are no words ("(?P<version>", "(?i)", "\bfailed")
_REGEX_NOISE = lazy_re(r"\(\?P<\w{1,40}>|\(\?P=\w{1,40}\)|\(\?[a-zA-Z]{1,6}\)|\\[A-Za-z]|\{\d{0,4},?\d{0,4}\}")
# a letter run in a pattern's source, with what stands on either side: a run glued to a class or a wildcard is a
# fragment ("initiali[sz]ation", "couldn.t"), not a word
_REGEX_WORD = lazy_re(r"(?<![A-Za-z])([A-Za-z]{3,})(?![A-Za-z])")
# a group of alternatives glued to a wildcard or class holds stems, not words ("(?:cycl|toggl|bounc)\w{0,6}")
_STEM_GROUP = lazy_re(r"\((?:\?:)?[^()]{0,2000}\)(?=\\[wS]|\[|\.)")


def corrected(line: str) -> str:
    """``line`` with each misspelt word replaced by the one known word 1 edit from it (see the module docstring);
    the line itself when no word changed."""
    if not line or len(line) > _MAX_LINE:
        return line
    out: list[str] = []
    last = 0
    for chunk in _CHUNK.finditer(line):
        text = chunk.group()
        if len(text) < _MIN_WORD or _NOT_WORDS.search(text):
            continue
        start = chunk.start()
        for part, offset in _parts(text):
            fixed = _fixed(part)
            if fixed != part:
                out.append(line[last:start + offset])
                out.append(fixed)
                last = start + offset + len(part)
    if not out:
        return line
    out.append(line[last:])
    return "".join(out)


def _parts(chunk: str) -> list[tuple[str, int]]:
    """The words of a chunk ("Nvidia-dkms," -> "Nvidia", "dkms"), each with its offset; none where a dot joins
    letters (a file name, a module path: ``libcuda.so``, ``torch.cuda``)."""
    begin, end = 0, len(chunk)
    while begin < end and chunk[begin] in _EDGE:
        begin += 1
    while end > begin and chunk[end - 1] in _EDGE:
        end -= 1
    core = chunk[begin:end]
    if "." in core or "'" in core.strip("'"):
        return []
    parts, offset = [], begin
    for part in core.split("-"):
        parts.append((part, offset))
        offset += len(part) + 1
    return parts


def _fixed(word: str) -> str:
    """The known word ``word`` is 1 edit from, in its case; ``word`` when it is known, not a word, or ambiguous."""
    if not (_MIN_WORD <= len(word) <= _MAX_WORD) or not word.isascii() or not word.isalpha():
        return word
    if not (word.islower() or word.isupper() or word.istitle()):
        return word  # a mixed-case name (cudaMalloc, NVreg): an identifier
    lower = word.lower()
    if set(lower) <= set("abcdef"):
        return word  # hex digits without a number ("deadbeef")
    known, _ = vocabulary()
    if _known(lower, known):
        return word
    match = _unique_neighbour(lower)
    if match is None:
        return word
    return match.upper() if word.isupper() else match.capitalize() if word.istitle() else match


def _known(word: str, known: frozenset[str]) -> bool:
    """Whether ``word`` or the word it inflects (plural, past, -ing, -ly) is known."""
    if word in known or word in _ENGLISH:
        return True
    stems = []
    for suffix, back in (("s", ""), ("es", ""), ("ed", ""), ("ed", "e"), ("d", ""), ("ing", ""), ("ing", "e"),
                         ("ly", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            stems.append(word[: len(word) - len(suffix)] + back)
    return any(stem in known for stem in stems)


def _unique_neighbour(word: str) -> str | None:
    """The one vocabulary word within Damerau-Levenshtein distance 1 of ``word`` (of several, the only one ``word`` is
    a deletion of); None for none or several."""
    _, index = vocabulary()
    candidates: set[str] = set(index.get(word, ()))
    for position in range(len(word)):
        candidates.update(index.get(word[:position] + word[position + 1:], ()))
    close = [c for c in candidates if c != word and _one_edit(word, c)]
    if len(close) == 1:
        return close[0]
    # several: a letter left out is the commonest slip of typing ("forver" is "forever", not "former"), so the one
    # word that ``word`` is a deletion of wins; otherwise it stays ambiguous
    longer = [c for c in close if len(c) == len(word) + 1]
    return longer[0] if len(longer) == 1 else None


def _one_edit(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` differ by one insertion, deletion, substitution or swap of neighbouring letters."""
    if abs(len(a) - len(b)) > 1:
        return False
    if len(a) > len(b):
        a, b = b, a
    prefix = 0
    while prefix < len(a) and a[prefix] == b[prefix]:
        prefix += 1
    if len(a) < len(b):  # one letter inserted
        return a[prefix:] == b[prefix + 1:]
    if a[prefix + 1:] == b[prefix + 1:]:  # one letter replaced
        return True
    return (prefix + 1 < len(a) and a[prefix] == b[prefix + 1] and a[prefix + 1] == b[prefix]
            and a[prefix + 2:] == b[prefix + 2:])  # two neighbours swapped


@functools.cache
def vocabulary() -> tuple[frozenset[str], dict[str, list[str]]]:
    """The known words (lower case) and the index of their single-letter deletions (each word under itself and
    under each of its deletions, once), built once, on first use, from the readers' own tables; not to be changed."""
    # one search over the texts joined (no word spans the newline between two), one read per distinct pattern
    words = {w.lower() for w in _TEXT_WORD.findall("\n".join(_table_texts()))}
    for pattern in dict.fromkeys(_patterns()):
        words.update(_pattern_words(pattern))
    known = frozenset(words)
    index: dict[str, list[str]] = {}
    for word in known:
        if len(word) < _MIN_WORD - 1 or len(word) > _MAX_WORD + 1:
            continue  # no word of 5 to 30 letters is 1 edit from it
        index.setdefault(word, []).append(word)
        last = ""
        for position, letter in enumerate(word):
            if letter == last:
                continue  # deleting either of two equal neighbours gives the same key: each word once under a key
            last = letter
            index.setdefault(word[:position] + word[position + 1:], []).append(word)
    return known, index


def _table_texts() -> list[str]:
    """The plain words of the catalogue's rows (example lines, summaries) and of the symptom-phrase families."""
    from gpuhealth.knowledge.signatures import signatures
    from gpuhealth.knowledge.symptom_phrases import phrases

    texts: list[str] = []
    for sig in signatures():
        texts += (sig.example, sig.summary)
    for phrase in phrases():
        texts += (*phrase.examples, *phrase.literals)
    return texts


def _patterns() -> list[str]:
    """The pattern sources the words readers match: the catalogue's, the symptom phrases', parsers/prose.py's."""
    from gpuhealth.knowledge.signatures import signatures
    from gpuhealth.knowledge.symptom_phrases import phrases
    from gpuhealth.lazyre import LazyPattern
    from gpuhealth.parsers import prose

    found = [sig.pattern for sig in signatures()]
    for phrase in phrases():
        found += [p.pattern for p in (phrase.subject, phrase.predicate, phrase.context) if p is not None]
    found += [value.pattern for value in vars(prose).values()
              if isinstance(value, LazyPattern) and isinstance(value.pattern, str)]
    return found


def _pattern_words(pattern: str) -> set[str]:
    """The whole words a pattern's source spells out: "(?i)unknown runtime" -> unknown, runtime; "modules?" ->
    modules, module; not the fragments glued to a class or wildcard ("initiali[sz]ation")."""
    # a run glued to \w or \S is a stem too ("disappear\w*" still spells "disappear" elsewhere, "cycl\w" does not)
    source = _STEM_GROUP.sub(" ", pattern).replace("\\w", ".").replace("\\S", ".")
    source = _REGEX_NOISE.sub(" ", source)
    found: set[str] = set()
    for match in _REGEX_WORD.finditer(source):
        before = source[match.start() - 1] if match.start() else " "
        after = source[match.end()] if match.end() < len(source) else " "
        if before in "[.]" or after in "[.]{*+":
            continue
        word = match.group(1).lower()
        if after == "?":
            found.add(word[:-1])  # the last letter is optional
        found.add(word)
    return found

