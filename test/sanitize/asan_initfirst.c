/*
 * asan_initfirst.c: preloaded into the sanitized server right after the ASan
 * runtime (scripts/sanitize.sh), so that both sanitizers start, with their
 * options, before the server does.
 *
 * ASan: a preloaded runtime is initialised after the executable's
 * libraries.  Debian's postgres pulls in p11-kit (through libldap and
 * gnutls), whose constructor calls newlocale; its malloc is then ASan's
 * first intercepted call, ASan initialises inside glibc's locale lock, and
 * the lock is left unbalanced: postgres -V hangs in bindtextdomain, other
 * programs at exit in freelocale.  An instrumented executable avoids this
 * with __asan_init in its .preinit_array; for the uninstrumented server
 * this object, linked with -z initfirst (glibc runs its constructor before
 * every other one), does the same.
 *
 * UBSan (gcc's libubsan) initialises at its first report and reads its
 * options from /proc/self/environ, which a backend has overwritten with its
 * process title by then: the report would lose its stack and the backend
 * exit with status 1 instead of aborting.  So UBSAN_OPTIONS is copied here
 * from the environment the constructor receives, and handed over through
 * __ubsan_default_options (this object is preloaded before libubsan, so its
 * definition is the one bound).  UBSan's reports go to the server's stderr:
 * gcc's runtime does not honour log_path.
 */
#include <string.h>

#define OPTIONS_VARIABLE "UBSAN_OPTIONS="

extern void __asan_init(void);
extern const char *__ubsan_default_options(void);

static char ubsan_options[4096];

const char *
__ubsan_default_options(void)
{
	return ubsan_options;
}

/* glibc passes an ELF constructor argc, argv and the environment; environ is not set yet. */
__attribute__((constructor))
static void
sanitizers_init_first(int argc, char **argv, char **envp)
{
	(void) argc;
	(void) argv;
	for (char **e = envp; e != NULL && *e != NULL; e++)
		if (strncmp(*e, OPTIONS_VARIABLE, strlen(OPTIONS_VARIABLE)) == 0 &&
			strlen(*e) < sizeof(ubsan_options) + strlen(OPTIONS_VARIABLE))
			strcpy(ubsan_options, *e + strlen(OPTIONS_VARIABLE));
	__asan_init();
}
