"""The run scripts written into a bundle: PowerShell for Windows, bash for WSL.

Each runs every line of ``cases.txt`` (a case directory, then the files DxDispatch will write
there) with ``dxdispatch <case>/model.json --output_path <case>``, after deleting that case's
outputs from an earlier run, and keeps what ``check`` needs: the case's DxDispatch output in
``dxdispatch.log`` and its exit status in ``exit_status.txt`` (a failed ``writeFile`` leaves the
status at 0, so ``check`` also looks for the files), plus, once per run, ``dxdispatch -S`` (the
DirectML version actually loaded) and ``dxdispatch --show_adapters``. Extra arguments go to every
DxDispatch call (``-a <adapter substring>``, ``-d`` for the debug layers).
"""

from __future__ import annotations

from pathlib import Path

POWERSHELL = "run_dxdispatch.ps1"
BASH = "run_dxdispatch.sh"

_PS1 = r"""# Runs every case of this dmlconform bundle with DxDispatch (written by 'dmlconform dxdispatch export').
# Usage:  $env:DXDISPATCH = "C:\path\to\dxdispatch.exe"   (or have dxdispatch.exe on PATH)
#         powershell -ExecutionPolicy Bypass -File run_dxdispatch.ps1 [dxdispatch options, e.g. -a NVIDIA]
# Every argument goes to each dxdispatch call. Afterwards copy this whole directory back and run:
#         dmlconform dxdispatch check <this directory>
$DxDispatch = if ($env:DXDISPATCH) { $env:DXDISPATCH } else { "dxdispatch.exe" }
$DxDispatchArgs = @($args)
$ErrorActionPreference = "Continue"
$here = Split-Path -Parent $MyInvocation.MyCommand.Path
if (-not (Get-Command $DxDispatch -ErrorAction SilentlyContinue)) {
    Write-Error "dxdispatch not found: set DXDISPATCH to the path of dxdispatch.exe"
    exit 2
}
& $DxDispatch -S 2>&1 | Out-File -LiteralPath (Join-Path $here "dxdispatch-dependencies.txt") -Encoding utf8
& $DxDispatch --show_adapters 2>&1 | Out-File -LiteralPath (Join-Path $here "dxdispatch-adapters.txt") -Encoding utf8
$lines = @(Get-Content -LiteralPath (Join-Path $here "cases.txt") | Where-Object { $_.Trim() -ne "" })
$n = 0
foreach ($line in $lines) {
    $n++
    $parts = $line.Trim() -split "\s+"
    $dir = Join-Path $here $parts[0]
    foreach ($f in ($parts | Select-Object -Skip 1)) {
        Remove-Item -LiteralPath (Join-Path $dir $f) -Force -ErrorAction SilentlyContinue
    }
    $log = Join-Path $dir "dxdispatch.log"
    & $DxDispatch @DxDispatchArgs (Join-Path $dir "model.json") --output_path $dir 2>&1 | Out-File -LiteralPath $log -Encoding utf8
    $code = $LASTEXITCODE
    Set-Content -LiteralPath (Join-Path $dir "exit_status.txt") -Value "$code" -Encoding ascii
    if ($n % 50 -eq 0) { Write-Host "dxdispatch: $n/$($lines.Count) cases" }
}
Write-Host "dxdispatch: ran $n cases; now run: dmlconform dxdispatch check $here"
"""

_SH = r"""#!/usr/bin/env bash
# Runs every case of this dmlconform bundle with DxDispatch (written by 'dmlconform dxdispatch export').
# Usage:  DXDISPATCH=/path/to/dxdispatch ./run_dxdispatch.sh [dxdispatch options, e.g. -a NVIDIA]
# Afterwards run:  dmlconform dxdispatch check <this directory>
set -u
here="$(cd "$(dirname "$0")" && pwd)"
dxd="${DXDISPATCH:-dxdispatch}"
if ! command -v "$dxd" >/dev/null 2>&1; then
    echo "dxdispatch not found: set DXDISPATCH=/path/to/dxdispatch" >&2
    exit 2
fi
"$dxd" -S >"$here/dxdispatch-dependencies.txt" 2>&1
"$dxd" --show_adapters >"$here/dxdispatch-adapters.txt" 2>&1
total=$(grep -c . "$here/cases.txt" || true)
n=0
while read -r dir outs; do
    [ -z "$dir" ] && continue
    n=$((n + 1))
    d="$here/$dir"
    for f in $outs; do rm -f "$d/$f"; done
    "$dxd" "$@" "$d/model.json" --output_path "$d" </dev/null >"$d/dxdispatch.log" 2>&1
    echo "$?" >"$d/exit_status.txt"
    if [ $((n % 50)) -eq 0 ]; then echo "dxdispatch: $n/$total cases"; fi
done <"$here/cases.txt"
echo "dxdispatch: ran $n cases; now run: dmlconform dxdispatch check $here"
"""


def write_scripts(root: Path) -> list[Path]:
    ps1 = root / POWERSHELL
    sh = root / BASH
    ps1.write_text(_PS1.replace("\n", "\r\n"), encoding="utf-8", newline="")
    sh.write_text(_SH, encoding="utf-8", newline="\n")
    sh.chmod(0o755)
    return [ps1, sh]
