"""Pictures and reports of the window (Qt). The window is handed in, never imported: the
window's File menu and the headless `screenshot`/`report` commands both export through here."""
