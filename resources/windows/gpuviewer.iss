; Inno Setup script for the Windows build (run on Windows after `pyinstaller gpuviewer.spec`):
;   iscc resources\windows\gpuviewer.iss
; Registers ProgIDs for our own file types without taking over .json, .gz or .sqlite:
; .nsys-rep is ours; the double extensions (.pt.trace.json) cannot be registered on Windows, so
; traces get "Open with gpuviewer" entries instead.
[Setup]
AppName=gpuviewer
AppVersion=0.1.0
DefaultDirName={autopf}\gpuviewer
DefaultGroupName=gpuviewer
OutputBaseFilename=gpuviewer-setup
ChangesAssociations=yes
PrivilegesRequiredOverridesAllowed=dialog

[Files]
Source: "..\..\dist\gpuviewer\*"; DestDir: "{app}"; Flags: recursesubdirs ignoreversion

[Icons]
Name: "{group}\gpuviewer"; Filename: "{app}\gpuviewer.exe"

[Registry]
; .nsys-rep -> gpuviewer.NsysReport
Root: HKA; Subkey: "Software\Classes\.nsys-rep"; ValueType: string; ValueName: ""; ValueData: "gpuviewer.NsysReport"; Flags: uninsdeletevalue
Root: HKA; Subkey: "Software\Classes\gpuviewer.NsysReport"; ValueType: string; ValueName: ""; ValueData: "Nsight Systems report"; Flags: uninsdeletekey
Root: HKA; Subkey: "Software\Classes\gpuviewer.NsysReport\shell\open\command"; ValueType: string; ValueName: ""; ValueData: """{app}\gpuviewer.exe"" ""%1"""
; "Open with" for traces and SQLite exports (no default handler taken)
Root: HKA; Subkey: "Software\Classes\gpuviewer.Trace"; ValueType: string; ValueName: ""; ValueData: "GPU trace"; Flags: uninsdeletekey
Root: HKA; Subkey: "Software\Classes\gpuviewer.Trace\shell\open\command"; ValueType: string; ValueName: ""; ValueData: """{app}\gpuviewer.exe"" ""%1"""
Root: HKA; Subkey: "Software\Classes\.json\OpenWithProgids"; ValueType: string; ValueName: "gpuviewer.Trace"; ValueData: ""; Flags: uninsdeletevalue
Root: HKA; Subkey: "Software\Classes\.gz\OpenWithProgids"; ValueType: string; ValueName: "gpuviewer.Trace"; ValueData: ""; Flags: uninsdeletevalue
Root: HKA; Subkey: "Software\Classes\.sqlite\OpenWithProgids"; ValueType: string; ValueName: "gpuviewer.Trace"; ValueData: ""; Flags: uninsdeletevalue
