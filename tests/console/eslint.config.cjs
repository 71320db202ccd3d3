// ESLint's configuration for the web console (server/http/console/) and its
// tests (tests/console/): eslint's recommended rules, with each file's
// globals. console_lint_test runs it from the repository root:
//   NODE_PATH=/opt/adapterd-tools/node_modules node /opt/adapterd-tools/node_modules/eslint/bin/eslint.js \
//     --config tests/console/eslint.config.cjs --max-warnings 0 server/http/console tests/console
// CommonJS, so that require() finds @eslint/js and globals through NODE_PATH
// ($ADAPTERD_TOOLS/node_modules, where scripts/install-deps.sh installs them
// pinned); an ES module's imports would not look there. The file patterns are
// relative to the directory eslint runs in (with --config, the base path).
'use strict';

const js = require('@eslint/js');
const globals = require('globals');

module.exports = [
  js.configs.recommended,
  {
    // A disable comment that disables nothing is a finding too.
    linterOptions: { reportUnusedDisableDirectives: 'error' },
  },
  {
    // The console: ES modules loaded by index.html.
    files: ['server/http/console/**/*.js'],
    languageOptions: { sourceType: 'module', globals: globals.browser },
  },
  {
    // The unit tests: ES modules under node's test runner.
    files: ['tests/console/**/*.mjs'],
    languageOptions: { sourceType: 'module', globals: globals.node },
  },
  {
    // console_test.js and this file: CommonJS under node.
    files: ['tests/console/**/*.js', 'tests/console/**/*.cjs'],
    languageOptions: { sourceType: 'commonjs', globals: globals.node },
  },
  {
    // The functions console_test.js hands to page.evaluate() and
    // waitForFunction() run in the page, with its DOM.
    files: ['tests/console/console_test.js'],
    languageOptions: { globals: { document: 'readonly', window: 'readonly' } },
  },
];
