"""The app's two modal screens: the key help (``?``) and the token search box (``/``)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import Input, Static

#: The help screen's text (Rich markup).
HELP = """\
[b]headseg tui — keys[/b]

  [b]tab[/b] / shift+tab   next / previous pane (document, matrix, grid)
  arrows, [b]hjkl[/b]      matrix: move the cell cursor · grid: choose a head
                   document: previous / next window (left/right)
  [b][[/b] / [b]][/b]            previous / next layer
  [b],[/b] / [b].[/b]            previous / next head
  [b]n[/b] / [b]p[/b]            next / previous window
  [b]a[/b]                cycle matrix: similarity, attention, ‖αf(x)‖, sentence blocks
  [b]m[/b]                pooling when the matrix is larger than the pane: max / mean
  [b]s[/b]                cycle the statistic that colours the grid
  [b]/[/b]                find a token (cursor jumps to it and its most similar token)
  [b]e[/b]                save the current matrix as PNG
  [b]?[/b]                this help        [b]q[/b]  quit

Grid: [b]●[/b] = head selected by the profile, [b][ ][/b] = the head shown.
Colours: viridis, dark = low, yellow = high; red = the cursor cell.
"""


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
