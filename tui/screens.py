"""The app's two modal screens: the key help (``?``) and the token search box (``/``)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import Input, Static

#: The help screen's key rows: the keys (each shown bold, joined by " / ") and what they do; a row
#: without keys continues the one above.  Descriptions stay within the box (78 columns less the keys').
_KEYS = (
    (("tab", "shift+tab"), "next / previous pane (document, matrix, grid)"),
    (("arrows", "hjkl"), "matrix: move the cell cursor · grid: choose a head"),
    ((), "document: previous / next window (left / right)"),
    (("[", "]"), "previous / next layer"),
    ((",", "."), "previous / next head"),
    (("n", "p"), "next / previous window"),
    (("a",), "cycle: similarity, attention, ‖αf(x)‖, sentence blocks"),
    (("m",), "pooling when the matrix is larger than the pane: max / mean"),
    (("s",), "cycle the statistic that colours the grid"),
    (("/",), "find a token: the cursor marks it and its most similar one"),
    (("e",), "save the current matrix as PNG"),
    (("?",), "this help"),
    (("q",), "quit"),
)
_KEY_COLUMN = 17


def _escape(text: str) -> str:
    # every "[" escaped: textual.markup.escape leaves a lone "[" as it is, and "[b][[/b]" then showed
    # as "[[/b] / ]" (the "[" took the closing tag for its own)
    return text.replace("[", "\\[")


def _key_row(keys: tuple[str, ...], what: str) -> str:
    # the padding counts the keys as shown, not their markup
    shown = " / ".join(keys)
    return ("  " + " / ".join(f"[b]{_escape(k)}[/b]" for k in keys) + " " * (_KEY_COLUMN - len(shown)) + what)


#: The help screen's text (Textual markup).
HELP = "\n".join(["[b]headseg tui — keys[/b]", "", *(_key_row(k, w) for k, w in _KEYS), "",
                  f"Grid: [b]●[/b] = head selected by the profile, [b]{_escape('[ ]')}[/b] = the head shown.",
                  "Colours: viridis, dark = low, yellow = high; red = the cursor cell.", ""])


class HelpScreen(ModalScreen[None]):
    """The key list (:data:`HELP`); escape, ``?`` or ``q`` closes it."""

    BINDINGS = [Binding("escape,question_mark,q", "dismiss_help", "close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Static { width: 84; height: auto; border: round $accent; padding: 1 2; background: $surface; }
    """

    def compose(self) -> ComposeResult:
        """The help text."""
        yield Static(HELP, id="help")

    def action_dismiss_help(self) -> None:
        """Close the screen."""
        self.dismiss(None)


class FindScreen(ModalScreen[str | None]):
    """A one-line search box; dismissed with the typed token, or None on escape."""

    BINDINGS = [Binding("escape", "cancel", "cancel")]
    DEFAULT_CSS = """
    FindScreen { align: center middle; }
    FindScreen > Input { width: 50; border: round $accent; }
    """

    def compose(self) -> ComposeResult:
        """The search box."""
        yield Input(placeholder="find token (e.g. river)", id="find")

    def on_mount(self) -> None:
        """Focus the search box."""
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Close with the typed token."""
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        """Close with None."""
        self.dismiss(None)
