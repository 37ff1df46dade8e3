# warm corpus: logging.basicConfig's first call configures the root logger (it has no handlers)
import logging

root = logging.getLogger()
print("root handlers", root.handlers, "level", logging.getLevelName(root.level))
print("lastResort", logging.lastResort is not None, "raiseExceptions", logging.raiseExceptions)
logging.warning("before basicConfig, through lastResort")
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s %(module)s %(funcName)s %(lineno)d: %(message)s")
print("root handlers", [type(h).__name__ for h in root.handlers])
logging.info("configured")
logging.getLogger("corpus.child").debug("not shown")
logging.getLogger("corpus.child").error("child error")
logging.basicConfig(level=logging.DEBUG, format="%(message)s")
logging.debug("still INFO: not shown")
try:
    1 / 0
except ZeroDivisionError:
    logging.exception("with a traceback")
