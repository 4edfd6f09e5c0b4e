"""The window's menu bar (File, View, Help) and the list Help → Keyboard shortcuts shows.

Each action is set on the window under the name its tests and code know it by (newChatAction,
quitAction, themeActions ...) and has an objectName of its own; its shortcut lives on it.
"""
from __future__ import annotations

from . import qt_compat  # noqa: F401  (first: guards a PySide6 bug, see qt_compat)
from PySide6.QtGui import QActionGroup, QKeySequence

from .theme import THEMES


def action(menu, text, slot, keys=None, name=""):
    a = menu.addAction(text)
    a.triggered.connect(slot)
    if keys is not None:
        a.setShortcut(QKeySequence(keys))
    a.setObjectName(name)
    return a


def build_menus(win) -> None:
    """File, View and Help, their actions set on `win` under their objectNames' names."""
    mb = win.menuBar()
    file_menu = mb.addMenu("&File")
    win.newChatAction = action(file_menu, "&New chat", win.new_conversation, "Ctrl+N", "newChatAction")
    win.openModelAction = action(file_menu, "&Open model…", win.choose_model, "Ctrl+O", "openModelAction")
    win.libraryAction = action(file_menu, "Model &library…", win.open_library, "Ctrl+Shift+O",
                               "modelLibraryAction")
    win.importAction = action(file_menu, "&Import conversation…", lambda: win.import_conversation(),
                              "Ctrl+I", "importAction")
    file_menu.addSeparator()
    win.quitAction = action(file_menu, "&Quit", win.request_quit, QKeySequence.StandardKey.Quit, "quitAction")
    if win.quitAction.shortcut().isEmpty():  # no platform binding: the usual one
        win.quitAction.setShortcut(QKeySequence("Ctrl+Q"))

    view = mb.addMenu("&View")
    win.searchAction = action(view, "&Search conversations", win.focus_search,
                              QKeySequence.StandardKey.Find, "searchAction")
    win.conversationsAction = action(view, "&Conversations", lambda on: win.set_panel("conversations", on),
                                     "Ctrl+B", "conversationsAction")
    win.focusListAction = action(view, "&Go to the conversation list", win.focus_conversations,
                                 "Ctrl+Shift+B", "focusConversationsAction")
    win.findNextAction = action(view, "Find &next in the chat", lambda: win.find_next(), "F3", "findNextAction")
    win.findPreviousAction = action(view, "Find &previous in the chat", lambda: win.find_next(False),
                                    "Shift+F3", "findPreviousAction")
    win.sidePanelAction = action(view, "Settings and &memory", lambda on: win.set_panel("side", on),
                                 "Ctrl+Shift+M", "sidePanelAction")
    for a in (win.conversationsAction, win.sidePanelAction):
        a.setCheckable(True)
    win.settingsAction = action(view, "Sett&ings…", win.focus_settings, "Ctrl+,", "settingsAction")
    theme_menu = view.addMenu("&Theme")
    group = QActionGroup(win)
    win.themeActions = {}
    for name in THEMES:
        a = theme_menu.addAction(name.capitalize())
        a.setCheckable(True)
        a.setObjectName(f"theme{name.capitalize()}Action")
        a.triggered.connect(lambda _=False, n=name: win.set_theme(n))
        group.addAction(a)
        win.themeActions[name] = a
    win.themeActions.get(win.settings.theme, win.themeActions["system"]).setChecked(True)

    help_menu = mb.addMenu("&Help")
    win.shortcutsAction = action(help_menu, "&Keyboard shortcuts", win.show_shortcuts, "Ctrl+/",
                                 "shortcutsAction")
    action(help_menu, "&About Pinwheel", win.show_about, "F1", "aboutAction")


def shortcut_list(win) -> list[tuple[str, str]]:
    """(keys, what) for Help → Keyboard shortcuts (and its test)."""
    rows = [(a.shortcut().toString(QKeySequence.SequenceFormat.NativeText), a.text().replace("&", ""))
            for a in (win.newChatAction, win.openModelAction, win.libraryAction, win.importAction, win.quitAction,
                      win.searchAction, win.conversationsAction, win.focusListAction, win.findNextAction,
                      win.findPreviousAction, win.sidePanelAction, win.settingsAction, win.shortcutsAction)]
    return rows + [("Enter / Ctrl+Enter", "Send"), ("Shift+Enter", "New line"), ("Esc", "Stop the reply"),
                   ("Ctrl+R", "Regenerate the last reply"), ("Ctrl+L", "Go to the message box"),
                   ("Ctrl+Shift+C", "Copy the last reply"), ("F1", "About Pinwheel")]
