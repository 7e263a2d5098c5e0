/**
 * Typechecks a job module before anything is started, so that a typo in an option (`watermark:`
 * for `watermarks:`) stops the run with the compiler's diagnostics instead of running a job that
 * silently ignores it. The job's tsconfig.json is used when there is one; only the user's files are
 * reported (not the package's own, nor node_modules).
 */
import { dirname, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

/** The package's root: `cli/..` in a checkout, `dist/cli/../..` in an installed package. */
const HERE = dirname(fileURLToPath(import.meta.url));
const PACKAGE_ROOT = resolve(HERE, HERE.split(sep).includes('dist') ? '../..' : '..');
const ENGINE_DIRS = ['shared', 'cdk', 'functions', 'local', 'cli', 'dist'].map((d) => resolve(PACKAGE_ROOT, d) + sep);

const DEFAULTS: ts.CompilerOptions = {
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  strict: true,
  esModuleInterop: true,
  skipLibCheck: true,
};

function compilerOptions(jobFile: string): ts.CompilerOptions {
  const config = ts.findConfigFile(dirname(jobFile), (f) => ts.sys.fileExists(f), 'tsconfig.json');
  if (!config) return DEFAULTS;
  const problems: ts.Diagnostic[] = [];
  const parsed = ts.getParsedCommandLineOfConfigFile(config, {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: (d) => problems.push(d) });
  if (!parsed || problems.length) throw new Error(`cannot read ${config}: ${problems.map((d) => ts.flattenDiagnosticMessageText(d.messageText, ' ')).join('; ')}`);
  return parsed.options;
}

function isUserFile(file: string): boolean {
  const abs = resolve(file);
  return !abs.split(sep).includes('node_modules') && !ENGINE_DIRS.some((d) => abs.startsWith(d)) && !abs.endsWith('.d.ts');
}

/** `file:line:column: error TSnnnn: message` for every error in the job module and the user's modules it imports. */
export function typecheckJob(jobModule: string): string[] {
  const file = resolve(jobModule);
  const program = ts.createProgram([file], { ...compilerOptions(file), noEmit: true, skipLibCheck: true, incremental: false, composite: false, declaration: false });
  const diagnostics: ts.Diagnostic[] = [...program.getOptionsDiagnostics(), ...program.getGlobalDiagnostics()];
  for (const sf of program.getSourceFiles()) {
    if (!isUserFile(sf.fileName)) continue;
    diagnostics.push(...program.getSyntacticDiagnostics(sf), ...program.getSemanticDiagnostics(sf));
  }
  return diagnostics
    .filter((d) => d.category === ts.DiagnosticCategory.Error)
    .map((d) => {
      const text = ts.flattenDiagnosticMessageText(d.messageText, '\n  ');
      if (!d.file || d.start === undefined) return `error TS${d.code}: ${text}`;
      const { line, character } = d.file.getLineAndCharacterOfPosition(d.start);
      return `${relative(process.cwd(), d.file.fileName) || d.file.fileName}:${line + 1}:${character + 1}: error TS${d.code}: ${text}`;
    });
}
