"""The knowledge console (``/console/``) in a real headless Chromium, against a real
``kb serve`` (``LocalServer``) over real files and a real Git server on loopback.

Each page is driven as an operator would: the scope list with its status and progress,
a PDF dropped onto a scope and found by search (with its page), the explain trace, a
note written, previewed and edited, a document deleted after its confirmation, a
repository registered, synced and its files listed, the shared library and its grants,
the settings (base URL and bearer token on every request), writes refused with the
reason in words (writes off, a body too large, a write limit), and every page checked
for labels, headings, keyboard entry, text contrast and a 360 px screen. Every test
fails on a JavaScript error in the page. ``KB_CONSOLE_SCREENSHOTS=DIR`` saves each page's
picture into DIR (``make console-screenshots``: docs/images).
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import document_files
import pytest
from chromium import chromium, wait
from gated_embedding import GatedEmbedder, large_text
from git_server import GitHttpServer, Workdir
from polling import wait_until
from selenium.common.exceptions import TimeoutException
from selenium.webdriver import Chrome
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions

from knowledge.agent_tools.shared import SharedGrants
from knowledge.core.model import IndexOptions
from knowledge.local.server import LocalServer
from knowledge.service.write_quotas import WriteLimits
from knowledge.stores.embedded import EmbeddedKnowledgeStore

pytestmark = pytest.mark.integration

ROLLBACK = """# Rolling back a release

## Helm

Run `helm rollback checkout-api` to return to the previous revision, then watch the pods.

## Argo CD

Disable auto-sync before rolling back, or Argo CD re-applies the broken revision.
"""
FAILOVER = "# Database failover\n\nPromote the standby replica when the primary stops answering.\n"
OUTAGE = "# Outage playbook\n\nDeclare the incident, page the commander, open the bridge.\n"
REFUNDS = "# Refunds\n\nRefunds are paid within 14 days.\n"
PAGES = ("scopes", "scope", "document", "repos", "shared", "settings")


@dataclass
class Stack:
    server: LocalServer
    root: Path
    embedder: GatedEmbedder

    @property
    def url(self) -> str:
        return self.server.url


def call(url: str, method: str, route: str, body: Any = None, content_type: str = "") -> Any:
    """One API request the test makes itself (the oracle beside the page): (status, body)."""
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + route, data=data, method=method)
    request.add_header("content-type", content_type or "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def listed_paths(url: str, agent: str, context: str) -> set[str]:
    status, body = call(url, "GET", f"/v1/agents/{agent}/contexts/{context}/documents?limit=1000")
    assert status == 200, body
    return {d["path"] for d in body["documents"] if d["indexed"]}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("console")
    root = tmp / "bucket"
    files = {
        "ops-bot/runbooks/rollback.md": ROLLBACK,
        "ops-bot/runbooks/failover.md": FAILOVER,
        "support-bot/faq/refunds.md": REFUNDS,
        "_shared/playbooks/outage.md": OUTAGE,
        "uploader/manuals/start.md": "# Start\n\nThe manuals begin here.\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, "utf-8")
    # A file the indexer cannot read: the scope's problem.
    (root / "support-bot/faq/locked.pdf").write_bytes(document_files.pdf(["x"], password="pw"))
    # Texts naming "zeppelin" wait for the gate once it is cleared (the progress test).
    embedder = GatedEmbedder("zeppelin")
    embedder.gate.set()
    with closing(EmbeddedKnowledgeStore(tmp / "k.db", embedder=embedder)) as store:
        server = LocalServer(
            root,
            store,
            port=0,
            poll_interval=0.2,
            allow_writes=True,
            shared_grants=SharedGrants.parse(["ops-bot=playbooks"]),
        )
        server.start()
        try:
            yield Stack(server, root, embedder)
        finally:
            embedder.gate.set()
            server.stop()


@pytest.fixture(scope="module")
def git(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GitHttpServer]:
    http = GitHttpServer(tmp_path_factory.mktemp("git-root"))
    yield http
    http.close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chrome]:
    driver = chromium(tmp_path_factory.mktemp("chromium"))
    try:
        yield driver
    finally:
        driver.quit()


def script_errors(driver: Chrome) -> list[str]:
    """The page's JavaScript errors since the last call (a refused request's own line,
    "Failed to load resource", is the API answering, not an error of the page)."""
    return [
        entry["message"]
        for entry in driver.get_log("browser")  # type: ignore[no-untyped-call]  # unannotated
        if entry["level"] == "SEVERE" and "Failed to load resource" not in entry["message"]
    ]


@pytest.fixture(autouse=True)
def page_without_errors(browser: Chrome) -> Iterator[None]:
    """Each test starts with a clean browser state and ends with no script error."""
    script_errors(browser)
    yield
    errors = script_errors(browser)
    browser.get("about:blank")
    assert errors == []


@pytest.fixture
def clean_storage(stack: Stack, browser: WebDriver) -> Iterator[None]:
    """The console's settings and kept notes live in the browser: empty before and after."""
    browser.get(stack.url + "/console/settings.html")
    browser.execute_script("localStorage.clear(); sessionStorage.clear();")
    yield
    browser.get(stack.url + "/console/settings.html")
    browser.execute_script("localStorage.clear(); sessionStorage.clear();")


def screenshot(driver: WebDriver, name: str) -> None:
    """The page, whole, into $KB_CONSOLE_SCREENSHOTS/console-<name>.png when that is set."""
    folder = os.environ.get("KB_CONSOLE_SCREENSHOTS")
    if not folder:
        return
    width = driver.execute_script("return document.documentElement.clientWidth")
    height = min(2600, driver.execute_script("return document.documentElement.scrollHeight"))
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot",
        {
            "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1},
        },
    )
    import base64

    Path(folder, f"console-{name}.png").write_bytes(base64.b64decode(shot["data"]))


def scope_page(driver: WebDriver, url: str, agent: str, context: str) -> None:
    driver.get(f"{url}/console/scope.html?agent={agent}&context={context}")
    wait(driver).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#status .status"))
    wait(driver).until(lambda d: "page 1" in d.find_element(By.ID, "documents-caption").text)


def text_of(driver: WebDriver, element_id: str) -> str:
    return driver.find_element(By.ID, element_id).text


def until_text(driver: WebDriver, element_id: str, text: str, seconds: float = 30.0) -> None:
    try:
        wait(driver, seconds).until(
            expected_conditions.text_to_be_present_in_element((By.ID, element_id), text)
        )
    except TimeoutException:
        shown = text_of(driver, element_id)
        raise AssertionError(f"#{element_id} never said {text!r}; it says {shown!r}") from None


def search_for(
    driver: WebDriver, query: str, *, mode: str = "keyword", explain: bool = False
) -> list[str]:
    """Search on the scope page; the results' paths, best first."""
    driver.find_element(By.CSS_SELECTOR, f"input[name=mode][value='{mode}']").click()
    box = driver.find_element(By.ID, "explain")
    if box.is_selected() != explain:
        box.click()
    field = driver.find_element(By.ID, "query")
    field.clear()
    field.send_keys(query)
    driver.execute_script("document.getElementById('search-message').textContent = ''")
    driver.find_element(By.ID, "search-button").click()
    wait(driver).until(lambda d: text_of(d, "search-message") not in ("", "Searching…"))
    return [
        item.get_attribute("data-path") or ""
        for item in driver.find_elements(By.CSS_SELECTOR, "#results li.result")
    ]


def drop_files(driver: WebDriver, zone_id: str, *paths: Path) -> None:
    """Drop real files onto an element, as a drag from the desktop does: the browser reads
    them through a file input (Selenium's way to hand it files), and a DataTransfer
    holding them is dropped on the element."""
    source = driver.execute_script(
        "const input = document.createElement('input'); input.type = 'file';"
        "input.multiple = true; input.id = 'test-drop-source'; document.body.append(input);"
        "return input;"
    )
    source.send_keys("\n".join(str(p) for p in paths))
    driver.execute_script(
        "const [input, zone] = arguments; const data = new DataTransfer();"
        "for (const file of input.files) data.items.add(file);"
        "for (const type of ['dragenter', 'dragover', 'drop']) {"
        "  zone.dispatchEvent(new DragEvent(type, {dataTransfer: data, bubbles: true,"
        "    cancelable: true}));"
        "}"
        "input.remove();",
        source,
        driver.find_element(By.ID, zone_id),
    )


def upload_item(driver: WebDriver, path: str) -> WebElement:
    return driver.find_element(By.CSS_SELECTOR, f"#uploads li[data-path='{path}']")


def until_upload(driver: WebDriver, path: str, state: str) -> WebElement:
    wait(driver, 60).until(
        lambda d: (
            d.find_elements(By.CSS_SELECTOR, f"#uploads li[data-path='{path}']")
            and upload_item(d, path).get_attribute("data-state") == state
        )
    )
    return upload_item(driver, path)


def requested(driver: WebDriver) -> set[str]:
    """The paths the page has fetched (the browser's resource timing), without queries."""
    urls = driver.execute_script(
        "return performance.getEntriesByType('resource').map((e) => e.name)"
    )
    return {urllib.parse.urlsplit(url).path for url in urls}


def rows(driver: WebDriver) -> list[WebElement]:
    return driver.find_elements(By.CSS_SELECTOR, "#scopes tr")


def document_row(driver: WebDriver, path: str) -> list[WebElement]:
    return driver.find_elements(By.CSS_SELECTOR, f"#documents tr[data-path='{path}']")


# --- the scopes page ----------------------------------------------------------------------


def test_the_scopes_page_lists_every_scope_with_its_status(
    stack: Stack, browser: WebDriver
) -> None:
    browser.get(stack.url + "/console")  # without the slash: sent on to /console/
    wait(browser).until(lambda d: d.current_url.endswith("/console/"))
    wait(browser).until(lambda d: len(rows(d)) == 4)
    # The page refreshes itself while a scope indexes: every scope is indexed from the start.
    wait(browser).until(
        lambda d: (
            [b.text for b in d.find_elements(By.CSS_SELECTOR, "#scopes .badge.state")]
            == ["READY"] * 4
        )
    )
    assert [r.get_attribute("data-scope") for r in rows(browser)] == [
        "_shared/playbooks",
        "ops-bot/runbooks",
        "support-bot/faq",
        "uploader/manuals",
    ]
    runbooks = browser.find_element(By.CSS_SELECTOR, "#scopes tr[data-scope='ops-bot/runbooks']")
    cells = {
        c.get_attribute("data-label"): c.text for c in runbooks.find_elements(By.TAG_NAME, "td")
    }
    _, status = call(stack.url, "GET", "/v1/agents/ops-bot/contexts/runbooks/status")
    assert cells["State"] == "READY"
    assert cells["Documents"] == "2"
    assert cells["Chunks"] == str(status["chunk_count"])
    assert cells["Problems"] == "none"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", cells["Last indexed"])
    faq = browser.find_element(By.CSS_SELECTOR, "#scopes tr[data-scope='support-bot/faq']")
    assert faq.find_element(By.CSS_SELECTOR, "td[data-label=Problems]").text == "1 not indexed"
    shared = browser.find_element(By.CSS_SELECTOR, "#scopes tr[data-scope='_shared/playbooks']")
    assert "shared library" in shared.text
    assert text_of(browser, "server-line") == "API: this server · writes on"
    # One contexts request an agent, no status request a scope.
    asked = requested(browser)
    assert {"/v1/agents/ops-bot/contexts", "/v1/agents/_shared/contexts"} <= asked
    assert not any(path.endswith("/status") for path in asked)
    screenshot(browser, "scopes")

    runbooks.find_element(By.LINK_TEXT, "ops-bot / runbooks").click()
    wait(browser).until(lambda d: text_of(d, "scope-title") == "ops-bot / runbooks")
    # The playground and the console link to each other.
    browser.find_element(By.LINK_TEXT, "Playground").click()
    wait(browser).until(lambda d: d.title == "knowledge-search playground")
    browser.find_element(By.LINK_TEXT, "Console").click()
    wait(browser).until(lambda d: d.current_url.endswith("/console/"))


def test_the_status_shows_progress_while_a_large_document_is_indexed(
    stack: Stack, browser: WebDriver
) -> None:
    embedder = stack.embedder
    embedder.calls = 0
    embedder.arrived.clear()
    embedder.gate.clear()
    try:
        (stack.root / "uploader/manuals/big.md").write_bytes(large_text("zeppelin"))
        assert embedder.arrived.wait(30), "the large document's embedding never started"
        browser.get(stack.url + "/console/")
        row = "#scopes tr[data-scope='uploader/manuals']"
        wait(browser).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, f"{row} .progress[data-document='big.md']")
        )
        progress = browser.find_element(By.CSS_SELECTOR, f"{row} .progress")
        assert browser.find_element(By.CSS_SELECTOR, f"{row} .badge.state").text == "INDEXING"
        assert int(progress.get_attribute("data-chunks-done") or "0") > 0
        assert re.search(r"writing big\.md \(1\.\d MiB\): \d+ of about \d+ chunks", progress.text)
        screenshot(browser, "progress")

        scope_page(browser, stack.url, "uploader", "manuals")
        assert "writing big.md" in text_of(browser, "status")
    finally:
        embedder.gate.set()
    # The page refreshes on its own while indexing, until the scope is ready.
    wait(browser, 60).until(
        lambda d: (
            d.find_element(By.CSS_SELECTOR, "#status .status").get_attribute("data-state")
            == "READY"
        )
    )
    assert browser.find_elements(By.CSS_SELECTOR, "#status .progress") == []


# --- a scope's page -----------------------------------------------------------------------


def test_a_dropped_pdf_and_a_chosen_file_are_uploaded_and_found_by_search(
    stack: Stack, browser: WebDriver, tmp_path: Path
) -> None:
    pdf = tmp_path / "pager-handbook.pdf"
    pdf.write_bytes(
        document_files.pdf(
            ["Pager duty handbook", "The wombatpager rota rotates weekly between engineers."],
            title="Pager handbook",
        )
    )
    notes = tmp_path / "escalation.md"
    notes.write_text("# Escalation\n\nCall the narwhalduty lead after ten minutes.\n", "utf-8")
    scope_page(browser, stack.url, "ops-bot", "runbooks")

    browser.find_element(By.ID, "folder").send_keys("manuals")
    drop_files(browser, "drop-zone", pdf)
    item = until_upload(browser, "manuals/pager-handbook.pdf", "indexed")
    assert "Searchable: pdf" in item.text
    sent = item.find_element(By.TAG_NAME, "progress")
    assert sent.get_attribute("value") == sent.get_attribute("max") == str(pdf.stat().st_size)
    stored = stack.root / "ops-bot/runbooks/manuals/pager-handbook.pdf"
    assert stored.read_bytes() == pdf.read_bytes()  # the file's bytes, unchanged

    browser.find_element(By.ID, "file-input").send_keys(str(notes))
    browser.find_element(By.ID, "upload-button").click()
    until_upload(browser, "manuals/escalation.md", "indexed")
    _, record = call(
        stack.url, "GET", "/v1/agents/ops-bot/contexts/runbooks/documents/manuals%2Fescalation.md"
    )
    assert (record["format"], record["origin"]) == ("markdown", "upload")

    assert search_for(browser, "wombatpager rota")[:1] == ["manuals/pager-handbook.pdf"]
    first = browser.find_element(By.CSS_SELECTOR, "#results li.result")
    # Where in the PDF: its two short pages make one chunk.
    assert "pp. 1-2" in first.find_element(By.CSS_SELECTOR, ".cite").text
    assert "wombatpager rota rotates weekly" in first.find_element(By.CSS_SELECTOR, ".passage").text
    # The uploads appear in the documents list.
    wait(browser).until(lambda d: document_row(d, "manuals/pager-handbook.pdf"))
    row = document_row(browser, "manuals/pager-handbook.pdf")[0]
    assert row.get_attribute("data-state") == "indexed"
    assert "pdf" in row.text
    # Its page shows its chunks as indexed: the one chunk of both pages, with its text.
    row.find_element(By.LINK_TEXT, "manuals/pager-handbook.pdf").click()
    wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#indexed-chunks li.result"))
    chunks = browser.find_elements(By.CSS_SELECTOR, "#indexed-chunks li.result")
    assert [c.get_attribute("data-chunk") for c in chunks] == ["0"]
    assert "pp. 1-2" in chunks[0].find_element(By.CSS_SELECTOR, ".cite").text
    assert (
        "wombatpager rota rotates weekly"
        in chunks[0].find_element(By.CSS_SELECTOR, ".passage").text
    )


def test_a_document_that_could_not_be_indexed_is_shown_with_its_reason(
    stack: Stack, browser: WebDriver
) -> None:
    scope_page(browser, stack.url, "support-bot", "faq")
    problems = browser.find_elements(By.CSS_SELECTOR, "#status .problems li")
    assert [p.text for p in problems] == ["locked.pdf encrypted PDF"]
    row = document_row(browser, "locked.pdf")[0]
    assert row.get_attribute("data-state") == "problem"
    assert row.find_element(By.CSS_SELECTOR, ".reason").text == "encrypted PDF"
    assert row.find_element(By.CSS_SELECTOR, "td[data-label=State]").text == "not indexed"


def test_the_documents_list_pages_with_the_listings_cursor(
    stack: Stack, browser: WebDriver
) -> None:
    folder = stack.root / "uploader/bulk"
    folder.mkdir()
    for n in range(53):
        (folder / f"doc{n:02d}.md").write_text(f"# Doc {n}\n\nNumber {n} of the pile.\n", "utf-8")
    wait_until(
        lambda: len(listed_paths(stack.url, "uploader", "bulk")) == 53, "53 documents indexed"
    )
    scope_page(browser, stack.url, "uploader", "bulk")

    def shown() -> list[str]:
        return [
            row.get_attribute("data-path") or ""
            for row in browser.find_elements(By.CSS_SELECTOR, "#documents tr")
        ]

    assert shown() == [f"doc{n:02d}.md" for n in range(50)]
    assert not browser.find_element(By.ID, "previous-page").is_enabled()
    browser.find_element(By.ID, "next-page").click()
    until_text(browser, "documents-caption", "page 2 (3 shown)")
    assert shown() == ["doc50.md", "doc51.md", "doc52.md"]
    assert not browser.find_element(By.ID, "next-page").is_enabled()
    browser.find_element(By.ID, "previous-page").click()
    until_text(browser, "documents-caption", "page 1 (50 shown)")
    assert shown()[0] == "doc00.md"


def test_the_explain_trace_shows_the_analysed_terms_and_each_results_numbers(
    stack: Stack, browser: WebDriver
) -> None:
    scope_page(browser, stack.url, "ops-bot", "runbooks")
    assert search_for(browser, "rolling back releases", explain=False)
    assert not browser.find_element(By.ID, "explain-trace").is_displayed()
    paths = search_for(browser, "rolling back releases", explain=True)
    assert paths[0] == "rollback.md"
    trace = browser.find_element(By.ID, "explain-trace")
    assert trace.is_displayed()
    terms = [t.text for t in browser.find_elements(By.CSS_SELECTOR, "#trace-searches .term")]
    assert terms == ["roll", "back", "releas"]  # the analysed (stemmed) terms
    record = browser.find_element(By.CSS_SELECTOR, "#trace-searches .trace-search")
    assert record.get_attribute("data-libraries") == "_shared/playbooks"  # ops-bot's grant
    lines = browser.find_elements(By.CSS_SELECTOR, "#results li.result .explain-line")
    assert len(lines) == len(paths)
    browser.find_element(By.CSS_SELECTOR, "#explain-trace summary").click()
    whole = json.loads(text_of(browser, "trace-json"))
    assert [r["search"] for r in whole["results"]] == [0] * len(paths)
    for line, entry in zip(lines, whole["results"], strict=True):
        assert float(line.get_attribute("data-searched") or "nan") == pytest.approx(
            entry["searched"]
        )
        assert "fused" in line.text
    browser.find_element(By.CSS_SELECTOR, "#explain-trace summary").click()  # closed again
    screenshot(browser, "scope")


def test_a_note_is_written_previewed_searched_and_edited(
    stack: Stack, browser: WebDriver, clean_storage: None
) -> None:
    scope_page(browser, stack.url, "ops-bot", "runbooks")
    path = browser.find_element(By.ID, "note-path")
    path.clear()
    path.send_keys("notes/standup.md")
    first = "# Standup\n\nThe quokkaagenda comes **first**."
    browser.find_element(By.ID, "note-text").send_keys(first)
    browser.find_element(By.ID, "preview-button").click()
    preview = browser.find_element(By.ID, "note-preview")
    assert preview.find_element(By.TAG_NAME, "h1").text == "Standup"
    assert preview.find_element(By.TAG_NAME, "strong").text == "first"
    assert browser.find_element(By.ID, "preview-button").get_attribute("aria-pressed") == "true"
    browser.find_element(By.ID, "note-save").click()
    until_text(browser, "note-message", "notes/standup.md is saved and searchable.")
    assert search_for(browser, "quokkaagenda") == ["notes/standup.md"]
    badge = browser.find_element(By.CSS_SELECTOR, "#results li.result .origin-manual")
    assert badge.text == "manual"

    # Edit it from the documents list: the editor holds the note as indexed.
    wait(browser).until(lambda d: document_row(d, "notes/standup.md"))
    row = document_row(browser, "notes/standup.md")[0]
    row.find_element(By.CSS_SELECTOR, "button[data-action=edit]").click()
    until_text(browser, "note-message", "Editing notes/standup.md")
    text = browser.find_element(By.ID, "note-text")
    assert text.get_attribute("value") == first
    text.clear()
    second = "# Standup\n\nThe wombatagenda comes first."
    text.send_keys(second)
    browser.find_element(By.ID, "note-save").click()
    until_text(browser, "note-message", "notes/standup.md is saved and searchable.")
    assert search_for(browser, "wombatagenda") == ["notes/standup.md"]
    assert search_for(browser, "quokkaagenda") == []
    stored = stack.root / "ops-bot/runbooks/notes/standup.md"
    assert stored.read_text("utf-8") == second
    sidecar = json.loads(Path(f"{stored}.metadata.json").read_text("utf-8"))
    assert sidecar["metadataAttributes"]["origin"] == "manual"

    # Changed elsewhere: the console has no copy of that version and says so.
    route = "/v1/agents/ops-bot/contexts/runbooks/documents/notes%2Fstandup.md"
    saved = call(stack.url, "GET", route)[1]["content_hash"]
    stored.write_text("# Standup\n\nChanged on disk.\n", "utf-8")
    wait_until(
        lambda: call(stack.url, "GET", route)[1]["content_hash"] != saved,
        "the change on disk is indexed",
    )
    document_row(browser, "notes/standup.md")[0].find_element(
        By.CSS_SELECTOR, "button[data-action=edit]"
    ).click()
    until_text(browser, "note-message", "does not return a note's text")
    assert browser.find_element(By.ID, "note-text").get_attribute("value") == ""


def test_a_document_is_deleted_only_after_its_confirmation(
    stack: Stack, browser: WebDriver
) -> None:
    obsolete = stack.root / "ops-bot/runbooks/obsolete.md"
    obsolete.write_text("# Obsolete\n\nThe dodoprocedure is retired.\n", "utf-8")
    wait_until(
        lambda: "obsolete.md" in listed_paths(stack.url, "ops-bot", "runbooks"),
        "obsolete.md is indexed",
    )
    scope_page(browser, stack.url, "ops-bot", "runbooks")
    wait(browser).until(lambda d: document_row(d, "obsolete.md"))
    delete = document_row(browser, "obsolete.md")[0].find_element(
        By.CSS_SELECTOR, "button[data-action=delete]"
    )
    assert delete.get_attribute("aria-label") == "Delete obsolete.md"
    delete.click()
    dialog = browser.find_element(By.CSS_SELECTOR, "dialog.confirm")
    assert dialog.is_displayed()
    assert "Delete obsolete.md?" in dialog.text
    # The focus is on Cancel; Escape cancels.
    assert browser.switch_to.active_element.text == "Cancel"
    browser.switch_to.active_element.send_keys(Keys.ESCAPE)
    until_text(browser, "documents-message", "Kept obsolete.md.")
    assert browser.find_elements(By.CSS_SELECTOR, "dialog.confirm") == []
    assert obsolete.exists()

    document_row(browser, "obsolete.md")[0].find_element(
        By.CSS_SELECTOR, "button[data-action=delete]"
    ).click()
    browser.find_element(By.CSS_SELECTOR, "dialog.confirm button[value=confirm]").click()
    until_text(browser, "documents-message", "obsolete.md is deleted and gone from the index.")
    # Its row had the focus and is gone: the focus is on the list's heading, not lost.
    assert browser.switch_to.active_element.get_attribute("id") == "documents-heading"
    assert not obsolete.exists()
    assert document_row(browser, "obsolete.md") == []
    status, _ = call(stack.url, "GET", "/v1/agents/ops-bot/contexts/runbooks/documents/obsolete.md")
    assert status == 404
    assert search_for(browser, "dodoprocedure") == []


def test_the_document_page_shows_the_record_and_finds_its_chunks(
    stack: Stack, browser: WebDriver
) -> None:
    _, record = call(stack.url, "GET", "/v1/agents/ops-bot/contexts/runbooks/documents/rollback.md")
    browser.get(
        f"{stack.url}/console/document.html?agent=ops-bot&context=runbooks&path=rollback.md"
    )
    wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#record dl"))
    facts = browser.find_element(By.CSS_SELECTOR, "#record dl")
    assert facts.get_attribute("data-chunks") == str(record["chunk_count"])
    assert facts.get_attribute("data-format") == "markdown"
    assert record["content_hash"] in facts.text
    # Its chunks as indexed, in order, as the chunks route answers them.
    _, listed = call(
        stack.url, "GET", "/v1/agents/ops-bot/contexts/runbooks/documents/rollback.md/chunks"
    )
    wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#indexed-chunks li.result"))
    shown = browser.find_elements(By.CSS_SELECTOR, "#indexed-chunks li.result")
    assert [c.get_attribute("data-chunk") for c in shown] == [
        str(c["chunk_index"]) for c in listed["chunks"]
    ]
    assert [c.find_element(By.CSS_SELECTOR, ".passage").text for c in shown] == [
        c["content"] for c in listed["chunks"]
    ]
    assert len(shown) == record["chunk_count"]
    assert not browser.find_element(By.ID, "edit-note").is_displayed()  # an upload, not a note

    field = browser.find_element(By.ID, "chunk-query")
    field.send_keys("argo auto-sync revision", Keys.ENTER)
    until_text(browser, "chunks-message", "found")
    found = browser.find_elements(By.CSS_SELECTOR, "#chunks li.result")
    assert found
    assert {f.get_attribute("data-path") for f in found} == {"rollback.md"}
    assert "Argo CD" in found[0].text
    screenshot(browser, "document")


# --- repositories -------------------------------------------------------------------------


def test_a_repository_is_registered_synced_and_its_files_listed(
    stack: Stack, browser: WebDriver, git: GitHttpServer, tmp_path: Path
) -> None:
    work = Workdir(git.root, "team/handbook", tmp_path / "work")
    work.write("README.md", "# Handbook\n\nStart with the capybaraguide.\n")
    work.write("guide/setup.md", "# Setup\n\nInstall the tools.\n")
    work.write("images/logo.png", b"\x89PNG\r\n\x1a\n" + b"\0" * 32)
    commit = work.commit("initial")
    browser.get(f"{stack.url}/console/repos.html?agent=ops-bot&context=runbooks")
    until_text(browser, "repos-message", "No repository is registered")

    browser.find_element(By.ID, "repo-name").send_keys("handbook")
    browser.find_element(By.ID, "repo-url").send_keys(git.url("team/handbook"))
    credential = browser.find_element(By.ID, "repo-credential")
    credential.send_keys("ghp_notAReferenceButTheSecret")
    browser.find_element(By.ID, "register-button").click()
    until_text(browser, "register-message", "never the secret. Nothing was sent.")
    assert credential.get_attribute("aria-invalid") == "true"
    assert call(stack.url, "GET", "/v1/agents/ops-bot/contexts/runbooks/repos")[1]["repos"] == []

    credential.clear()
    browser.find_element(By.ID, "register-button").click()
    until_text(browser, "register-message", "Registered handbook")
    card = "#repos article[data-repo='handbook']"
    wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, card))
    assert "never synced" in browser.find_element(By.CSS_SELECTOR, card).text

    browser.find_element(By.CSS_SELECTOR, f"{card} button[data-action=sync]").click()
    wait(browser, 60).until(
        lambda d: "Synced" in d.find_element(By.CSS_SELECTOR, f"{card} .message").text
    )
    message = browser.find_element(By.CSS_SELECTOR, f"{card} .message").text
    assert message == f"Synced {commit[:12]}: 2 written, 0 deleted, 0 unchanged."
    shown = browser.find_element(By.CSS_SELECTOR, f"{card} code.commit")
    assert shown.get_attribute("data-commit") == commit
    files = [
        f.get_attribute("data-path")
        for f in browser.find_elements(By.CSS_SELECTOR, f"{card} ul.files li[data-path]")
    ]
    assert files == ["_repos/handbook/README.md", "_repos/handbook/guide/setup.md"]
    assert {"_repos/handbook/README.md", "_repos/handbook/guide/setup.md"} <= listed_paths(
        stack.url, "ops-bot", "runbooks"
    )
    screenshot(browser, "repos")

    browser.find_element(By.CSS_SELECTOR, f"{card} button[data-action=remove]").click()
    browser.find_element(By.CSS_SELECTOR, "dialog.confirm button[value=confirm]").click()
    until_text(browser, "repos-message", "Removed handbook")
    assert call(stack.url, "GET", "/v1/agents/ops-bot/contexts/runbooks/repos")[1]["repos"] == []
    wait_until(
        lambda: (
            not any(
                p.startswith("_repos/handbook/")
                for p in listed_paths(stack.url, "ops-bot", "runbooks")
            )
        ),
        "the repository's files leave the index",
    )


# --- the shared library -------------------------------------------------------------------


def test_the_shared_library_page_shows_each_library_and_each_agents_grant(
    stack: Stack, browser: WebDriver
) -> None:
    browser.get(stack.url + "/console/shared.html")
    wait(browser).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#grants tr")) == 3)
    wait(browser).until(
        lambda d: all(
            r.get_attribute("data-libraries") is not None
            for r in d.find_elements(By.CSS_SELECTOR, "#grants tr")
        )
    )
    library = browser.find_element(By.CSS_SELECTOR, "#libraries tr[data-library='playbooks']")
    cells = {
        c.get_attribute("data-label"): c.text for c in library.find_elements(By.TAG_NAME, "td")
    }
    assert (cells["State"], cells["Documents"]) == ("READY", "1")
    grants = {
        r.get_attribute("data-agent"): r.get_attribute("data-libraries")
        for r in browser.find_elements(By.CSS_SELECTOR, "#grants tr")
    }
    assert grants == {"ops-bot": "playbooks", "support-bot": "", "uploader": ""}
    assert "/v1/agents/ops-bot/shared" in requested(browser)  # the grants, from the API
    support = browser.find_element(By.CSS_SELECTOR, "#grants tr[data-agent='support-bot'] td")
    assert support.text == "none"
    screenshot(browser, "shared")

    # A library's page is read-only: the page says so, and the API refuses a note.
    library.find_element(By.LINK_TEXT, "playbooks").click()
    wait(browser).until(lambda d: d.find_element(By.ID, "write-notice").is_displayed())
    assert "read-only" in text_of(browser, "write-notice")
    assert browser.find_elements(By.CSS_SELECTOR, "#documents button[data-action=delete]") == []
    browser.find_element(By.ID, "note-text").send_keys("# Mine\n\nnot allowed")
    browser.find_element(By.ID, "note-save").click()
    until_text(browser, "note-message", "read-only through the API")
    assert not (stack.root / "_shared/playbooks/notes").exists()


# --- settings -----------------------------------------------------------------------------


def test_the_settings_base_url_and_token_go_with_every_request(
    stack: Stack, browser: WebDriver, clean_storage: None
) -> None:
    browser.get(stack.url + "/console/settings.html")
    wait(browser).until(lambda d: text_of(d, "server-line").startswith("API"))
    browser.find_element(By.ID, "hand-scopes").send_keys("nope")
    browser.find_element(By.ID, "save-settings").click()
    until_text(browser, "settings-message", "'nope' is not agent/context")
    scopes = browser.find_element(By.ID, "hand-scopes")
    scopes.clear()
    scopes.send_keys("ops-bot/elsewhere")
    browser.find_element(By.ID, "api-base").send_keys(stack.url)
    browser.find_element(By.ID, "token").send_keys("console-test-token")
    browser.find_element(By.ID, "save-settings").click()
    until_text(browser, "settings-message", "Saved.")
    assert text_of(browser, "server-line") == f"API {stack.url} · bearer token set"
    browser.find_element(By.ID, "check-api").click()
    until_text(browser, "settings-message", "The API answers: ok, store embedded")
    screenshot(browser, "settings")

    # The scope named by hand is listed beside the server's.
    browser.get(stack.url + "/console/")
    wait(browser).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, "#scopes tr[data-scope='ops-bot/elsewhere']")
    )

    scope_page(browser, stack.url, "ops-bot", "runbooks")
    # Record what the page sends from here on: fetch and XMLHttpRequest alike.
    browser.execute_script(
        "window.sent = []; const fetched = window.fetch;"
        "window.fetch = (url, options) => {"
        "  window.sent.push([String(url), (options.headers || {}).Authorization || '']);"
        "  return fetched(url, options); };"
        "const open = XMLHttpRequest.prototype.open;"
        "const header = XMLHttpRequest.prototype.setRequestHeader;"
        "XMLHttpRequest.prototype.open = function (method, url) {"
        "  this.recorded = [String(url), '']; window.sent.push(this.recorded);"
        "  return open.apply(this, arguments); };"
        "XMLHttpRequest.prototype.setRequestHeader = function (name, value) {"
        "  if (name === 'Authorization') this.recorded[1] = value;"
        "  return header.apply(this, arguments); };"
    )
    search_for(browser, "helm rollback")
    path = browser.find_element(By.ID, "note-path")
    path.clear()
    path.send_keys("notes/token.md")
    browser.find_element(By.ID, "note-text").send_keys("# Token\n\nsent with a token")
    browser.find_element(By.ID, "note-save").click()
    until_text(browser, "note-message", "notes/token.md is saved and searchable.")
    sent = browser.execute_script("return window.sent")
    routes = {url.split("?")[0].removeprefix(stack.url) for url, _ in sent}
    assert "/v1/agents/ops-bot/contexts/runbooks/search" in routes
    assert "/v1/agents/ops-bot/contexts/runbooks/documents/notes%2Ftoken.md" in routes
    assert all(url.startswith(stack.url + "/") for url, _ in sent)
    assert {auth for _, auth in sent} == {"Bearer console-test-token"}


# --- refusals -----------------------------------------------------------------------------


def test_with_writes_off_every_write_is_refused_and_the_page_says_why(
    browser: WebDriver, tmp_path: Path
) -> None:
    root = tmp_path / "bucket"
    (root / "ops-bot/runbooks").mkdir(parents=True)
    (root / "ops-bot/runbooks/rollback.md").write_text(ROLLBACK, "utf-8")
    upload = tmp_path / "pager.md"
    upload.write_text("# Pager\n\nThe rota.\n", "utf-8")
    before = sorted(p.name for p in (root / "ops-bot/runbooks").iterdir())
    with closing(EmbeddedKnowledgeStore(tmp_path / "k.db")) as store:
        server = LocalServer(root, store, port=0, poll_interval=0.2)
        server.start()
        try:
            scope_page(browser, server.url, "ops-bot", "runbooks")
            wait(browser).until(lambda d: d.find_element(By.ID, "write-notice").is_displayed())
            assert "Writes are off on this server" in text_of(browser, "write-notice")
            assert "writes off" in text_of(browser, "server-line")

            browser.find_element(By.ID, "file-input").send_keys(str(upload))
            browser.find_element(By.ID, "upload-button").click()
            item = until_upload(browser, "pager.md", "refused")
            assert item.get_attribute("data-status") == "403"
            assert "writes are off on this server" in item.text
            assert "--allow-writes" in item.text

            browser.find_element(By.ID, "note-text").send_keys("# Note\n\ntext")
            browser.find_element(By.ID, "note-save").click()
            until_text(browser, "note-message", "--allow-writes")

            wait(browser).until(lambda d: document_row(d, "rollback.md"))
            document_row(browser, "rollback.md")[0].find_element(
                By.CSS_SELECTOR, "button[data-action=delete]"
            ).click()
            browser.find_element(By.CSS_SELECTOR, "dialog.confirm button[value=confirm]").click()
            until_text(browser, "documents-message", "--allow-writes")
        finally:
            server.stop()
    assert sorted(p.name for p in (root / "ops-bot/runbooks").iterdir()) == before


def test_a_body_too_large_and_a_write_limit_are_said_in_words(
    browser: WebDriver, tmp_path: Path
) -> None:
    root = tmp_path / "bucket"
    (root / "ops-bot/runbooks").mkdir(parents=True)
    (root / "ops-bot/runbooks/rollback.md").write_text(ROLLBACK, "utf-8")
    big = tmp_path / "big.md"
    big.write_text("# Big\n\n" + "words " * 2000, "utf-8")  # 12 KB
    small = [tmp_path / f"small{n}.md" for n in range(2)]
    for n, file in enumerate(small):
        file.write_text(f"# Small {n}\n\nA small note.\n", "utf-8")
    with closing(EmbeddedKnowledgeStore(tmp_path / "k.db")) as store:
        server = LocalServer(
            root,
            store,
            port=0,
            poll_interval=0.2,
            allow_writes=True,
            options=IndexOptions(max_document_bytes=4096),
            write_limits=WriteLimits(requests_per_minute=1),
            quota_clock=lambda: 60_000.0 + 30.0,  # 30 s into a minute: "retry after 30 s"
        )
        server.start()
        try:
            scope_page(browser, server.url, "ops-bot", "runbooks")
            browser.find_element(By.ID, "file-input").send_keys(str(big))
            browser.find_element(By.ID, "upload-button").click()
            item = until_upload(browser, "big.md", "refused")
            assert item.get_attribute("data-status") == "413"
            assert "Too large" in item.text
            assert "must be at most 4096 bytes, got 12007" in item.text

            browser.find_element(By.ID, "file-input").send_keys(
                "\n".join(str(file) for file in small)
            )
            browser.find_element(By.ID, "upload-button").click()
            until_upload(browser, "small0.md", "indexed")
            item = until_upload(browser, "small1.md", "refused")
            assert item.get_attribute("data-status") == "429"
            assert "Write limit reached" in item.text
            assert "write_requests_per_minute: 1" in item.text
            assert item.text.endswith("Retry after 30 s.")
        finally:
            server.stop()
    assert not (root / "ops-bot/runbooks/small1.md").exists()


# --- every page ---------------------------------------------------------------------------

AUDIT = """
const problems = [];
const visible = (n) => !!(n.offsetWidth || n.offsetHeight || n.getClientRects().length);
for (const control of document.querySelectorAll('input, select, textarea')) {
  if (control.type === 'hidden' || !visible(control)) continue;
  const named = control.labels.length || control.getAttribute('aria-label')
    || control.getAttribute('aria-labelledby');
  if (!named) problems.push(`no label: ${control.outerHTML.slice(0, 80)}`);
}
for (const button of document.querySelectorAll('button, a')) {
  if (visible(button) && !(button.textContent.trim() || button.getAttribute('aria-label'))) {
    problems.push(`no name: ${button.outerHTML.slice(0, 80)}`);
  }
}
const ids = [...document.querySelectorAll('[id]')].map((n) => n.id);
for (const id of ids) if (ids.indexOf(id) !== ids.lastIndexOf(id)) problems.push(`id twice: ${id}`);
if (document.querySelectorAll('h1').length !== 1) problems.push('not one h1');
let level = 0;
for (const h of document.querySelectorAll('h1, h2, h3, h4, h5, h6')) {
  const next = Number(h.tagName[1]);
  if (next > level + 1) problems.push(`heading skips to h${next}: ${h.textContent}`);
  level = next;
}
for (const tag of ['header', 'nav', 'main']) {
  if (!document.querySelector(tag)) problems.push(`no ${tag}`);
}
for (const n of document.querySelectorAll('[tabindex]')) {
  if (Number(n.getAttribute('tabindex')) > 0) problems.push(`tabindex > 0: ${n.id}`);
}
const rgba = (text) => {
  const parts = text.match(/[\\d.]+/g).map(Number);
  return { r: parts[0], g: parts[1], b: parts[2], a: parts.length > 3 ? parts[3] : 1 };
};
const channel = (v) => {
  v /= 255;
  return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
};
const luminance = (c) => 0.2126 * channel(c.r) + 0.7152 * channel(c.g) + 0.0722 * channel(c.b);
const background = (node) => {
  const layers = [];
  for (let n = node; n; n = n.parentElement) {
    const c = rgba(getComputedStyle(n).backgroundColor);
    if (c.a > 0) { layers.push(c); if (c.a >= 1) break; }
  }
  let out = { r: 255, g: 255, b: 255 };
  for (const c of layers.reverse()) {
    out = { r: c.r * c.a + out.r * (1 - c.a), g: c.g * c.a + out.g * (1 - c.a),
      b: c.b * c.a + out.b * (1 - c.a) };
  }
  return out;
};
let checked = 0;
for (const n of document.querySelectorAll('body *')) {
  const own = [...n.childNodes].some((c) => c.nodeType === 3 && c.textContent.trim());
  if (!own || !visible(n) || n.closest('[hidden]')) continue;
  if (n.matches('.skip')) continue;  // off screen until focused
  const style = getComputedStyle(n);
  const fg = rgba(style.color);
  const [l1, l2] = [luminance(fg), luminance(background(n))].sort((a, b) => b - a);
  const ratio = (l1 + 0.05) / (l2 + 0.05);
  const size = parseFloat(style.fontSize);
  const large = size >= 24 || (size >= 18.66 && Number(style.fontWeight) >= 700);
  checked += 1;
  if (ratio < (large ? 3 : 4.5)) {
    const text = n.textContent.trim().slice(0, 40);
    problems.push(`contrast ${ratio.toFixed(2)}: ${n.tagName} ${text}`);
  }
}
if (checked < 10) problems.push(`only ${checked} texts checked`);
return problems;
"""


def page_urls(url: str) -> dict[str, str]:
    scope = "agent=ops-bot&context=runbooks"
    return {
        "scopes": f"{url}/console/",
        "scope": f"{url}/console/scope.html?{scope}",
        "document": f"{url}/console/document.html?{scope}&path=rollback.md",
        "repos": f"{url}/console/repos.html?{scope}",
        "shared": f"{url}/console/shared.html",
        "settings": f"{url}/console/settings.html",
    }


def settle(driver: WebDriver) -> None:
    """Wait until the page has drawn what it fetched (its server line is written last)."""
    wait(driver).until(lambda d: text_of(d, "server-line").startswith("API"))


def test_every_page_is_labelled_keyboard_usable_contrasted_and_fits_a_narrow_screen(
    stack: Stack, browser: WebDriver
) -> None:
    for name, url in page_urls(stack.url).items():
        browser.get(url)
        settle(browser)
        assert browser.execute_script(AUDIT) == [], name
        # The first Tab reaches the skip link; following it puts the focus on the content.
        ActionChains(browser).send_keys(Keys.TAB).perform()
        skip = browser.switch_to.active_element
        assert skip.get_attribute("class") == "skip", name
        assert skip.is_displayed(), name  # shown while focused
        skip.send_keys(Keys.ENTER)
        wait(browser).until(lambda d: d.switch_to.active_element.get_attribute("id") == "main")

    # A phone's viewport (a desktop window cannot be made this narrow).
    browser.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": 360, "height": 800, "deviceScaleFactor": 1, "mobile": True},
    )
    try:
        for name, url in page_urls(stack.url).items():
            browser.get(url)
            settle(browser)
            # A page wider than the screen widens a phone's layout viewport.
            width = browser.execute_script(
                "return Math.max(window.innerWidth, document.documentElement.scrollWidth)"
            )
            assert width == 360, f"{name} is {width} px wide on a 360 px screen"
            assert browser.execute_script(AUDIT) == [], name
            if name == "scope":
                # Tables become one card per row: the header row is out of sight.
                head = browser.find_element(By.CSS_SELECTOR, "#documents-table thead")
                assert head.size["height"] <= 1
                screenshot(browser, "narrow")
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    assert set(page_urls(stack.url)) == set(PAGES)
