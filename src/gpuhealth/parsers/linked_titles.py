"""The title of a thread a person links instead of quoting its error: the slug in the thread's address.

People write "I got the error in https://stackoverflow.com/questions/43022843/nvidia-nvml-driver-library-version-mismatch"
or "same as https://forums.developer.nvidia.com/t/nvidia-smi-has-failed-because-it-couldnt-communicate-with-the-nvidia-
driver/12345". The sites below put the thread's title in its address, lower-cased, with every run of punctuation and
blanks turned into one hyphen: the slug. Its words ("nvidia nvml driver library version mismatch") are what the
reporter points at, usually the error message they saw. They are the reporter's words, not a program's output: analyze
reads them with the readers of a person's words and marks what they give as reported (at most a warning).

The address schemes read (each site's own URL scheme):

- Stack Exchange sites (stackoverflow.com, askubuntu.com, superuser.com, serverfault.com, mathoverflow.net and
  ``*.stackexchange.com``): ``/questions/<id>/<slug>``
  (the Stack Exchange API's ``link`` field of a question, https://api.stackexchange.com/docs/types/question);
- Discourse forums (forums.developer.nvidia.com, discuss.pytorch.org, and hosts named forum(s)./discuss./discourse./
  community.): ``/t/<slug>/<topic id>[/<post number>]``, Discourse's topic route
  (https://github.com/discourse/discourse/blob/main/config/routes.rb, ``get "t/:slug/:topic_id"``);
- Reddit: ``/r/<subreddit>/comments/<id>/<slug>/``, Reddit's permalink
  (https://www.reddit.com/dev/api/, a thing's ``permalink``);
- NVIDIA's former forum, devtalk.nvidia.com (old links remain in answers, issues and code comments):
  ``/default/topic/<id>/[<board>/]<slug>/``, as its addresses read (e.g. https://devtalk.nvidia.com/default/topic/
  925605/linux/nvidia-364-12-release-vulkan-glvnd-drm-kms-and-eglstreams/; some have no board).

A GitHub issue's address (``/owner/repo/issues/123``) and a documentation page's hold no title: nothing is read from
them. A slug of fewer than ``MIN_WORDS`` words says too little ("topic" is Discourse's slug for a title it cannot
spell). Cost: one bounded pattern over the text, at most ``MAX_ADDRESSES`` addresses, each slug at most ``MAX_SLUG``
characters: linear.
"""

from __future__ import annotations

import re

from gpuhealth.lazyre import lazy_re
from gpuhealth.records import record

__all__ = ["MAX_ADDRESSES", "LinkedTitle", "as_sentence", "linked_titles", "without_addresses"]

MAX_ADDRESSES = 8  # addresses read per text
MAX_SLUG = 200  # characters of a slug read (Stack Exchange cuts its slugs at about 80)
MAX_TEXT = 2_000_000  # characters of a text searched
MIN_WORDS = 3

_STACK_EXCHANGE = frozenset({"stackoverflow.com", "askubuntu.com", "superuser.com", "serverfault.com",
                             "mathoverflow.net"})
_DISCOURSE = frozenset({"forums.developer.nvidia.com", "discuss.pytorch.org"})
_DISCOURSE_PREFIXES = ("forum.", "forums.", "discuss.", "discourse.", "community.")

# an address: the scheme, the host, and the path up to a blank, a quote or a closing bracket (Markdown's "(...)")
_ADDRESS = lazy_re(r"https?://(?P<host>[a-z0-9][a-z0-9.-]{0,100})(?P<path>/[^\s<>()\[\]\"'`]{0,600})", re.I)
_SE_PATH = lazy_re(r"^/q(?:uestions)?/\d{1,12}/(?P<slug>[a-z0-9][a-z0-9-]{0,300})", re.I)
_DISCOURSE_PATH = lazy_re(r"^/t/(?P<slug>[a-z0-9][a-z0-9-]{0,300})/\d{1,12}(?:/|$|[?#])", re.I)
_DEVTALK_PATH = lazy_re(r"^/default/topic/\d{1,12}/(?:[a-z0-9-]{1,80}/)?(?P<slug>[a-z][a-z0-9-]{0,300})", re.I)
_REDDIT_PATH = lazy_re(r"^/r/\w{1,50}/comments/[a-z0-9]{1,12}/(?P<slug>[a-z0-9][a-z0-9_-]{0,300})", re.I)


@record
class LinkedTitle:
    address: str  # the address as written (at most 300 characters)
    words: str  # the slug's words, blank-separated, lower-cased


def linked_titles(text: str) -> list[LinkedTitle]:
    """The titles of the threads that ``text`` links (at most ``MAX_ADDRESSES``), in text order, each once."""
    if "://" not in text:
        return []
    found: list[LinkedTitle] = []
    seen: set[str] = set()
    for m in _ADDRESS.finditer(text[:MAX_TEXT]):
        slug = _slug(m["host"].lower().removeprefix("www."), m["path"])
        if not slug:
            continue
        words = " ".join(w for w in slug[:MAX_SLUG].lower().replace("_", "-").split("-") if w)
        if words.count(" ") + 1 < MIN_WORDS or words in seen:
            continue
        seen.add(words)
        found.append(LinkedTitle(m.group(0).rstrip(".,;:!?")[:300], words))
        if len(found) >= MAX_ADDRESSES:
            break
    return found


# A title that opens with an auxiliary verb before its subject is a question ("is nvidia-smi slow without persistence
# mode"): English asks by inversion, and the slug has dropped the question mark that said so
_INVERTED = lazy_re(r"^(?:is|are|was|were|am|does|do|did|can|could|should|shall|will|would|may|might|must|has|have|"
                    r"had)(?:n t)? (?!not\b)\S")


def without_addresses(line: str) -> str:
    """``line`` with each web address blanked: an address is no sentence of the person who wrote the line, and a
    title in it is read as a title (``linked_titles``), asking or telling, not as words of the line around it."""
    return _ADDRESS.sub(" ", line[:MAX_TEXT]) if "://" in line else line


def as_sentence(words: str) -> str:
    """A title's words as the sentence its author wrote: an inverted question gets back the question mark the slug
    dropped, so that the readers of a person's words take it as asking, not telling."""
    return f"{words}?" if _INVERTED.match(words) else words


def _slug(host: str, path: str) -> str:
    """The title slug of an address on a site that puts one in its path, else empty."""
    if host in _STACK_EXCHANGE or host.endswith(".stackexchange.com"):
        m = _SE_PATH.match(path)
    elif host in _DISCOURSE or host.startswith(_DISCOURSE_PREFIXES):
        m = _DISCOURSE_PATH.match(path)
    elif host == "devtalk.nvidia.com":
        m = _DEVTALK_PATH.match(path)
    elif host == "reddit.com" or host.endswith(".reddit.com"):
        m = _REDDIT_PATH.match(path)
    else:
        return ""
    return m["slug"] if m else ""
