-- Neovim's own LSP client on the file it was started with: wait for torchlint's diagnostics,
-- choose the TL201 quick fix through the code action menu (vim.ui.select), save, quit.
-- Written for Neovim 0.7 (Debian 12's) and later. Environment: TORCHLINT_SERVER_CMD (a JSON list),
-- TORCHLINT_NVIM_LOG (where to write what happened).
local log_path = os.getenv("TORCHLINT_NVIM_LOG")
local function log(message)
  local file = io.open(log_path, "a")
  file:write(message .. "\n")
  file:close()
end
local function fail(message)
  log("FAIL " .. message)
  vim.cmd("cquit 3")
end

local buffer = vim.api.nvim_get_current_buf()
local config = { name = "torchlint", cmd = vim.fn.json_decode(os.getenv("TORCHLINT_SERVER_CMD")), root_dir = vim.fn.getcwd() }
if vim.lsp.start then
  vim.lsp.start(config)
else
  vim.lsp.buf_attach_client(buffer, vim.lsp.start_client(config))
end

local function code_of(diagnostic)
  local lsp = diagnostic.user_data and diagnostic.user_data.lsp
  return diagnostic.code or (lsp and lsp.code)
end

if not vim.wait(120000, function() return #vim.diagnostic.get(buffer) >= 2 end, 50) then
  fail("no diagnostics from the server")
end
local target
for _, diagnostic in ipairs(vim.diagnostic.get(buffer)) do
  log(string.format("DIAGNOSTIC %s %d:%d", code_of(diagnostic), diagnostic.lnum, diagnostic.col))
  if code_of(diagnostic) == "TL201" then
    target = diagnostic
  end
end
if not target then
  fail("no TL201 diagnostic")
end
vim.api.nvim_win_set_cursor(0, { target.lnum + 1, target.col })

vim.ui.select = function(items, opts, on_choice)
  for index, item in ipairs(items) do
    local title = opts.format_item and opts.format_item(item) or tostring(item)
    log("ACTION " .. title)
    if string.find(title, "TL201: Replace", 1, true) then
      on_choice(item, index)
      return
    end
  end
  on_choice(nil, nil)
end
vim.lsp.buf.code_action()

if not vim.wait(120000, function() return vim.api.nvim_buf_get_option(buffer, "modified") end, 50) then
  fail("the code action changed nothing")
end
vim.cmd("write")
log("SAVED")
vim.cmd("qall!")
